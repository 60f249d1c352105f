"""The teaching notebooks run top to bottom in a real kernel and show what their text claims."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient
from outputs import find
from polling import assert_ray_session_gone

from nbdist.cluster import lifetime

pytestmark = pytest.mark.timeout(120)

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def test_01_tasks_tree_beats_chain_and_nested_prints_show(run_notebook, cell_text) -> None:
    nb = run_notebook("02-tasks.ipynb")
    assert nb.cells[0].source.startswith("# 02 · Tasks")
    cells = cell_text(nb)
    chain = find(cells, r"chain: sum 36 in ([\d.]+) s")
    tree = find(cells, r"tree:  sum 36 in ([\d.]+) s")
    assert float(tree[1]) < float(chain[1]) - 0.5
    # Stepped level by level: each step releases the ready set and says what it made ready.
    find(cells, re.escape("step-through mode on"))
    find(cells, re.escape("released 4 tasks (add ×4); 2 held."))
    find(cells, re.escape("released 2 tasks (add ×2); 1 held."))
    find(cells, re.escape("step-through mode off; released 1 task (add)."))
    find(cells, "stepped tree sum: 36")
    sleepers = find(cells, r"4 sleeps of 1 s took ([\d.]+) s; they finished within ([\d.]+) s")
    assert float(sleepers[2]) < 0.5  # together, not in two rounds a second apart
    find(cells, r"one task per number: 10,000 numbers in [\d.]+ s")
    batching = find(cells, r"100 tasks of 1,000 numbers: 100,000 numbers in [\d.]+ s, (\d+)x")
    assert int(batching[1]) > 1
    loop = find(cells, r"get in the loop: 6 adds in ([\d.]+) s; one get of the list: ([\d.]+) s")
    assert float(loop[2]) < float(loop[1])
    assert find(cells, 'class="nbdist-ref"')
    find(cells, r"result: 42")
    find(cells, r"\(tree_sum pid=\d+\) sum of \[1, 2, 3, 4, 5, 6, 7, 8\] = 36")
    find(cells, r"caught a ZeroDivisionError from the task: division by zero")


def test_04_actors_state_concurrency_names_and_restarts(run_notebook, cell_text) -> None:
    nb = run_notebook("04-actors.ipynb")
    assert nb.cells[0].source.startswith("# 04 · Actors")
    cells = cell_text(nb)
    find(cells, re.escape("[1, 2, 3, 4, 5, 110]"))
    find(cells, "after 4 tasks x 10 increments: 40")
    find(cells, re.escape("4 counters in 4 processes: [1, 2, 3, 4]"))
    find(cells, r"both worlds at t = 0\.50 s after 50 steps each")
    tops = re.findall(r"highest particle ([\d.]+) m \(a throw at 10 m/s reaches ([\d.]+) m\)",
                      "".join(cells))
    assert len(tops) == 2 and all(float(top) <= float(bound) for top, bound in tops)
    m = find(cells, r"120 updates from 3 workers: w = ([\d.-]+), c = ([\d.-]+)")
    assert abs(float(m[1]) - 3.0) < 0.1 and abs(float(m[2]) - 0.5) < 0.1
    assert len(re.findall(r"\(train_worker pid=\d+\) worker \d done", "".join(cells))) == 3
    find(cells, r"4 async calls of 0\.5 s took [\d.]+ s \| calls overlap: True")
    find(cells, "3 calls ran at once, in 3 threads")
    find(cells, r"found by name: ActorHandle \| count: 15\n")
    m = find(cells, r"first attempt's worker \(pid (\d+)\) was killed; the retry returned 42 "
                    r"in pid (\d+)")
    assert m[1] != m[2]
    find(cells, re.escape("restarted in a new process: True | count starts over: 1"))
    find(cells, r"retried: fragile \(attempt 2\)")
    find(cells, r"restarted: actor \w+ \(1 restart\)")


def test_03_objects_zero_copy_dag_and_results_in_finish_order(run_notebook, cell_text) -> None:
    nb = run_notebook("03-objects.ipynb")
    assert nb.cells[0].source.startswith("# 03 · Objects")
    cells = cell_text(nb)
    find(cells, "equal: True [|] writeable: False")
    find(cells, "read-only: assignment destination is read-only")
    find(cells, r"49999995000000\.0 == 49999995000000\.0")
    find(cells, re.escape("product: (1000, 1000) | all zero: True"))
    graph = find(cells, r'<div class="nbdist-dag-view" data-dag-nodes="4"[\s\S]*</svg>')[0]
    assert graph.count('data-dag-node="zeros"') == 2 and graph.count('data-dag-node="multiply"') == 1
    assert graph.count('data-dag-edge="data"') == 4
    find(cells, re.escape("executed: [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]"))
    find(cells, re.escape("finish order: [4, 16, 9, 1]"))
    find(cells, re.escape("all: [1, 4, 9, 16, 25, 36]"))


def test_04_patterns_count_reduce_nest_pipeline_pool_and_queue(run_notebook,
                                                               cell_text) -> None:
    cells = cell_text(run_notebook("05-patterns.ipynb"))
    counts = {w: int(find(cells, rf"(?m)^{w}: (\d+)$")[1]) for w in ("the", "on", "cat", "road")}
    assert counts == {"the": 1500, "on": 750, "cat": 500, "road": 500}
    find(cells, "same as collections.Counter over the whole text: True")
    find(cells, "tree reduce of 16 partial sums in 4 levels: 499999500000\n")
    for p, theory in (("0.45", 0.119), ("0.5", 0.5), ("0.55", 0.881)):
        m = find(cells, rf"p = {re.escape(p)}: P\(reach 20\) simulated ([\d.]+), theory ([\d.]+)")
        assert float(m[2]) == theory and abs(float(m[1]) - theory) < 0.03
    find(cells, r"get in submission order: [\d.]+ s")
    find(cells, r"same results: True \| processing order: \[(\d+, ){7}\d+\]")
    find(cells, "inputs served by 2 actor processes")
    find(cells, "map, in input order, equal to the model run here: True")
    find(cells, "map_unordered, same scores in finish order: True")
    find(cells, "produced 20, consumed 20: each number once: True")
    find(cells, re.escape("left in the queue: 0"))


@pytest.mark.timeout(360)
def test_09_es_a2c_and_ppo_reach_their_stated_returns(run_notebook, cell_text) -> None:
    nb = run_notebook("09-reinforcement-learning.ipynb")
    cells = cell_text(nb)
    es = find(cells, r"ES: test return ([\d.]+) after (\d+) generations \((\d+) training episodes\)")
    assert (float(es[1]), int(es[2]), int(es[3])) == (500.0, 8, 128)
    a2c = find(cells, r"A2C: mean return ([\d.]+) over the last 20 episodes after (\d+) steps "
                      r"\((\d+) episodes\)")
    assert (float(a2c[1]), int(a2c[2]), int(a2c[3])) == (483.6, 105, 420)
    ppo = find(cells, r"PPO: greedy return ([\d.]+) after (\d+) iterations \(([\d,]+) env steps\)")
    assert float(ppo[1]) >= 475 and int(ppo[2]) < 100, ppo[0]
    assert float(find(cells, r"one greedy episode with compute_single_action: return (\d+)")[1]) > 200
    # the PPO run's live view, in the cell that trains
    # (a long wait may add its own progress bar, an IntProgress: the run view is the VBox)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "algo.train()" in c.source)
    views = [o for o in cell.outputs if o.output_type == "display_data"
             and "application/vnd.jupyter.widget-view+json" in o.data
             and o.data.get("text/plain", "").startswith("VBox")]
    assert len(views) == 1, f"{len(views)} live views in the cell that trains PPO"
    assert "rllib · PPO_CartPole-v1_" in views[0].data["text/plain"]


def test_08_tune_grid_random_asha_hyperband_and_a_tuned_training_loop(run_notebook,
                                                                      cell_text) -> None:
    nb = run_notebook("08-tune.ipynb")
    assert nb.cells[0].source.startswith("# 08 · Tune")
    cells = cell_text(nb)
    for call in ("run_experiments(", "loguniform(", "ASHAScheduler(", "HyperBandScheduler("):
        # One live view per search, in the cell that ran it, however short the search.
        cell = next((c for c in nb.cells if c.cell_type == "code" and call in c.source), None)
        assert cell is not None, f"no cell calls {call}"
        views = [o for o in cell.outputs if o.output_type == "display_data"
                 and "application/vnd.jupyter.widget-view+json" in o.data]
        assert len(views) == 1, f"{len(views)} live views in the cell calling {call}"
    find(cells, "the grid has 6 trials\n")
    reached = re.findall(r"alpha=(0\.[246]) beta=([12]): mean_accuracy ([\d.]+)", "".join(cells))
    assert {(a, b) for a, b, _ in reached} == {(a, b) for a in ("0.2", "0.4", "0.6")
                                                for b in ("1", "2")}
    assert all(float(value) >= 2 for _, _, value in reached)  # each stopped at its target
    asha = find(cells, r"ASHA stopped (\d+) of 12 trials early, (\d+) of 384 epochs run")
    assert 0 < int(asha[1]) < 12 and int(asha[2]) < 384
    drawn = re.findall(r"lr=([\d.]+) momentum=([\d.]+): loss ([\d.]+)", "".join(cells))
    assert len(drawn) == 10 and len(set(drawn)) == 10
    assert all(1e-4 <= float(lr) <= 1 and 0 <= float(mom) <= 1 for lr, mom, _ in drawn)
    losses = [float(loss) for _, _, loss in drawn]
    assert losses == sorted(losses)
    assert float(find(cells, r"10 random trials; lr spans ([\d.]+) decades")[1]) >= 2
    hyperband = find(cells, r"HyperBand stopped (\d+) of 12 trials early, (\d+) of 192 epochs run")
    assert 0 < int(hyperband[1]) < 12 and int(hyperband[2]) < 192
    find(cells, re.escape("stopped early, q: [0.2, 0.4]"))
    find(cells, r"best q: 1\.0\n")
    find(cells, r"best config: lr=0\.3 l2=0\.0, val_loss 0\.30\d")
    frame = find(cells, r"<table[\s\S]*?</table>")[0]
    assert frame.count("<tr>") == 6  # one row per trial


@pytest.mark.timeout(900)  # ~3 min at a load of 12; over 7 at 30
def test_07_training_lenet_with_and_without_ddp_tensorflow_and_a_resumed_run(run_notebook,
                                                                            cell_text) -> None:
    # A TensorFlow worker's import alone takes half a minute or more on a loaded machine.
    cells = cell_text(run_notebook("07-training.ipynb", timeout=300))
    find(cells, "LeNet: 44,426 parameters, 178 KB of float32 gradient per step")
    for who in ("one process", "2 DDP workers"):
        losses = [float(v) for v in
                  find(cells, rf"{who}: loss by epoch ([\d.]+(?: -> [\d.]+)+)")[1].split(" -> ")]
        assert len(losses) == 3 and losses[-1] < losses[0] / 2, (who, losses)
        assert float(find(cells, rf"{who}: ([\d,]+) samples/s")[1].replace(",", "")) > 0
    find(cells, r"crossover on 2 dedicated cores: about \d+ samples per worker")
    assert len(re.findall(r"worker [01]: loss [\d.]+, weights checksum", "".join(cells))) == 2
    find(cells, "replicas equal: True")
    # The seeds' TensorFlow program: 2 MultiWorkerMirroredStrategy workers, the same LeNet.
    tf_runs = re.findall(r"TF_CONFIG task \{'type': 'worker', 'index': ([01])\}: 44,426 "
                         r"parameters, loss by step ([\d.]+(?: -> [\d.]+)+), weights checksum",
                         "".join(cells))
    assert [index for index, _ in tf_runs] == ["0", "1"], tf_runs
    losses = [float(v) for v in tf_runs[0][1].split(" -> ")]
    assert tf_runs[0][1] == tf_runs[1][1] and len(losses) == 6 and losses[-1] < losses[0], tf_runs
    find(cells, "TensorFlow replicas equal: True")
    # Worker 1 died in epoch 2 of the first group; the second resumed from epoch 1's checkpoint.
    find(cells, r"\(rank 0 pid=\d+\) resuming at epoch 2")
    find(cells, re.escape("epochs reported: [0, 1, 2, 3]"))
    find(cells, re.escape("first epoch of each report: [0, 0, 2, 2]"))
    find(cells, r"finished: epoch 3, loss [\d.]+, checkpoint checkpoint_000003")


def _stop_course_cluster(text: str) -> list[int]:
    """Stop the daemons 01-cluster started with `nbdist start`, found through the state folder
    its head's start printed (``text``: the outputs), and kill any left; the pids they had."""
    m = re.search(r"files and logs in (\S+)/head-", text)
    if m is None or not Path(m[1]).exists():  # the notebook's own `nbdist stop` removed it
        return []
    state = Path(m[1])
    pids = [pid for f in state.glob("*/session.json") for pid in json.loads(f.read_text())["pids"]]
    subprocess.run([str(Path(sys.executable).parent / "nbdist"), "stop"], capture_output=True,
                   env=dict(os.environ, NBDIST_STATE_DIR=str(state)), timeout=60)
    for pid in pids:
        if lifetime.process_running(pid):
            os.kill(pid, signal.SIGKILL)
    return pids


def _execute(name: str, timeout: int) -> tuple[Any, NotebookClient]:
    """The notebook and a client to run it, for tests that clean up after a failed cell."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(nb, kernel_name="python3", timeout=timeout,
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    return nb, client


@pytest.mark.timeout(300)  # with `%nbdist up` on two simulated hosts
def test_01_cluster_is_drawn_live_and_runs_a_task_on_each_of_two_nodes(cell_text) -> None:
    nb, client = _execute("01-cluster.ipynb", timeout=120)
    assert nb.cells[0].source.startswith("# 01 · The cluster")
    try:
        client.execute()
    finally:
        # The daemons outlive the kernel by design: a failing cell must not leave them running.
        left = _stop_course_cluster("".join(cell_text(nb)))
    cells = cell_text(nb)
    find(cells, "class='nbdist-status'")
    find(cells, r"6 tasks ran in worker processes \[\d+(, \d+)*\] on node\(s\) \['\w+'\]")
    find(cells, r"\d+ objects in the store .*; the largest: 30\.5 MiB on node \w+")
    find(cells, re.escape("tasks by state: {'FINISHED': 6}"))
    drawings = re.findall(r"<svg[\s\S]*?</svg>", "".join(cells))
    assert len(drawings) == 2 and all("driver: this kernel" in d for d in drawings)
    assert [d.count(">node ") for d in drawings] == [1, 2]
    pinned = re.findall(r"task pinned to node (\w+) ran on node (\w+) in worker pid \d+",
                        "".join(cells))
    assert len(pinned) == 2 and all(a == b for a, b in pinned) and pinned[0][0] != pinned[1][0]
    find(cells, re.escape("2 tasks on 2 different nodes: True"))
    # The head, its client server (for thin drivers), its node and the node that joined; all
    # ended by the notebook's `nbdist stop`.
    find(cells, "4 daemon processes started, still running after nbdist stop: 0")
    assert left == []
    # `%nbdist up` on two simulated hosts, where this machine allows it; else it says why.
    text = "".join(cells)
    if "cannot simulate hosts on this machine" in text:
        assert not _can_simulate_hosts(), "the notebook skipped `up` on a machine that can"
        assert "cluster_name: course" in text and "is up" not in text
    else:
        lab = find(cells, r"2 simulated hosts, each with its own sshd: ([\d.]+), ([\d.]+)")
        for address in lab.groups():
            for step in ("connecting", "checking", "starting", "joined"):
                assert re.search(rf"^\s*{re.escape(address)}\s+{step}", text, re.M), text
            find(cells, rf"the task pinned to the node at \S*{re.escape(address)}\S* ran there: True")
        find(cells, "no process left on the hosts after %nbdist down: True")
    find(cells, "lab removed: True")


def _can_simulate_hosts() -> bool:
    return (sys.platform.startswith("linux") and os.geteuid() == 0
            and all(shutil.which(t) for t in ("ip", "ssh", "ssh-keygen"))
            and os.path.exists("/usr/sbin/sshd"))


def test_06_parallelism_parameter_servers_allreduce_and_pipeline(run_notebook,
                                                                 cell_text) -> None:
    nb = run_notebook("06-parallelism.ipynb")
    assert nb.cells[0].source.startswith("# 06 · Data parallelism")
    cells = cell_text(nb)
    best = float(find(cells, r"least-squares optimum: ([\d.]+)")[1])
    sync = find(cells, r"sync PS: 40 updates of the mean of 4 gradients: loss ([\d.]+)")
    asyn = find(cells, r"async PS: 160 updates of one gradient each, staleness mean [\d.]+, "
                       r"max \d+: loss ([\d.]+)")
    ring = find(cells, r"allreduce: 40 steps on 4 replicas: loss ([\d.]+)")
    for converged in (sync[1], asyn[1], ring[1]):
        assert float(converged) < best * 1.05, (converged, best)
    find(cells, "every actor got the same sum: True\nequal to the sum computed here: True")
    find(cells, re.escape("replicas identical: True | same weights as the synchronous server: "
                          "True"))
    same = re.findall(r"pipeline, +(\d+) micro-batch(?:es)?: [\d.]+ s .*same output as the unsplit "
                      r"model: (\w+)", "".join(cells))
    assert same == [("1", "True"), ("4", "True"), ("16", "True")]
    assert find(cells, r"<table>[\s\S]*?</table>")[0].count("<tr>") == 7  # header + 6 rows


@pytest.mark.timeout(420)
def test_10_scaling_out_gives_the_same_result_on_both_backends(cell_text) -> None:
    # Ray's start takes tens of seconds on a busy 2-core machine.
    nb, client = _execute("10-scaling-out.ipynb", timeout=300)
    assert nb.cells[0].source.startswith("# 10 · Scaling out")
    try:
        client.execute()
    finally:
        session = re.search(r"started a local Ray \(session (/\S+)\)", "".join(cell_text(nb)))
        if session is not None:
            assert_ray_session_gone(os.path.realpath(session[1]), "the notebook's kernel")
    cells = cell_text(nb)
    expected = sum(i * i for i in range(1_600_000))
    find(cells, rf"expected: {expected}\n")
    find(cells, rf"nbdist: result {expected} \(started in [\d.]+ s\)")
    find(cells, rf"Ray: result {expected} \(started in [\d.]+ s\)")
    find(cells, "same result on both backends: True")
    assert find(cells, r"<table>[\s\S]*?</table>")[0].count("<tr>") == 5  # header + 4 rows

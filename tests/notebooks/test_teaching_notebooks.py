"""The teaching notebooks run top to bottom in a real kernel and show what their text claims."""

from __future__ import annotations

import re

import pytest
from outputs import find

pytestmark = pytest.mark.timeout(120)


def test_01_tasks_tree_beats_chain_and_nested_prints_show(run_notebook, cell_text) -> None:
    cells = cell_text(run_notebook("02-tasks.ipynb"))
    chain = find(cells, r"chain: sum 36 in ([\d.]+) s")
    tree = find(cells, r"tree:  sum 36 in ([\d.]+) s")
    assert float(tree[1]) < float(chain[1]) - 0.5
    assert find(cells, 'class="nbdist-ref"')
    find(cells, r"result: 42")
    find(cells, r"\(tree_sum pid=\d+\) sum of \[1, 2, 3, 4, 5, 6, 7, 8\] = 36")
    find(cells, r"caught a ZeroDivisionError from the task: division by zero")


def test_02_actors_keep_state_and_the_parameter_server_converges(run_notebook,
                                                                 cell_text) -> None:
    cells = cell_text(run_notebook("04-actors.ipynb"))
    find(cells, re.escape("[1, 2, 3, 4, 5, 110]"))
    find(cells, "after 4 tasks x 10 increments: 40")
    m = find(cells, r"120 updates from 3 workers: w = ([\d.-]+), c = ([\d.-]+)")
    assert abs(float(m[1]) - 3.0) < 0.1 and abs(float(m[2]) - 0.5) < 0.1
    assert len(re.findall(r"\(train_worker pid=\d+\) worker \d done", "".join(cells))) == 3


def test_03_objects_zero_copy_and_results_in_finish_order(run_notebook, cell_text) -> None:
    cells = cell_text(run_notebook("03-objects.ipynb"))
    find(cells, "equal: True [|] writeable: False")
    find(cells, "read-only: assignment destination is read-only")
    find(cells, r"49999995000000\.0 == 49999995000000\.0")
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


@pytest.mark.timeout(240)
def test_09_es_and_a2c_reach_their_stated_returns(run_notebook, cell_text) -> None:
    cells = cell_text(run_notebook("09-reinforcement-learning.ipynb"))
    es = find(cells, r"ES: test return ([\d.]+) after (\d+) generations \((\d+) training episodes\)")
    assert (float(es[1]), int(es[2]), int(es[3])) == (500.0, 8, 128)
    a2c = find(cells, r"A2C: mean return ([\d.]+) over the last 20 episodes after (\d+) steps "
                      r"\((\d+) episodes\)")
    assert (float(a2c[1]), int(a2c[2]), int(a2c[3])) == (483.6, 105, 420)


def test_05_tune_grid_asha_and_a_tuned_training_loop(run_notebook, cell_text) -> None:
    nb = run_notebook("08-tune.ipynb")
    cells = cell_text(nb)
    for call in ("run_experiments(", "ASHAScheduler("):
        # One live view per search, in the cell that ran it, however short the search.
        cell = next(c for c in nb.cells if c.cell_type == "code" and call in c.source)
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
    find(cells, r"best q: 1\.0\n")
    find(cells, r"best config: lr=0\.3 l2=0\.0, val_loss 0\.30\d")
    frame = find(cells, r"<table[\s\S]*?</table>")[0]
    assert frame.count("<tr>") == 6  # one row per trial


@pytest.mark.timeout(300)
def test_07_training_lenet_with_and_without_ddp_and_a_resumed_run(run_notebook,
                                                                  cell_text) -> None:
    cells = cell_text(run_notebook("07-training.ipynb"))
    find(cells, "LeNet: 44,426 parameters, 178 KB of float32 gradient per step")
    for who in ("one process", "2 DDP workers"):
        losses = [float(v) for v in
                  find(cells, rf"{who}: loss by epoch ([\d.]+(?: -> [\d.]+)+)")[1].split(" -> ")]
        assert len(losses) == 3 and losses[-1] < losses[0] / 2, (who, losses)
        assert float(find(cells, rf"{who}: ([\d,]+) samples/s")[1].replace(",", "")) > 0
    find(cells, r"crossover on 2 dedicated cores: about \d+ samples per worker")
    assert len(re.findall(r"worker [01]: loss [\d.]+, weights checksum", "".join(cells))) == 2
    find(cells, "replicas equal: True")
    # Worker 1 died in epoch 2 of the first group; the second resumed from epoch 1's checkpoint.
    find(cells, r"\(rank 0 pid=\d+\) resuming at epoch 2")
    find(cells, re.escape("epochs reported: [0, 1, 2, 3]"))
    find(cells, re.escape("first epoch of each report: [0, 0, 2, 2]"))
    find(cells, r"finished: epoch 3, loss [\d.]+, checkpoint checkpoint_000003")

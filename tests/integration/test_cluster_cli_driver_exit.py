"""A driver attached to a cluster started with ``nbdist start`` that goes away (Ctrl-C, or
killed) takes its work with it, as a driver that owns its cluster does: its tasks that wait or
run on any node end (their workers are stopped), its actors end; detached actors stay.
Also: a head started with ``--num-cpus 0`` runs no tasks and gets no actor that asked for no
resources (Ray places those only on a node with a CPU), as asked.

The drivers are real script processes sent a real signal; the cluster is real.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from clusters import Cli, alive, start_head
from polling import poll

pytestmark = [pytest.mark.timeout(180), pytest.mark.nbdist_only]


def _driver(cli: Cli, address: str, marks: Path) -> subprocess.Popen[str]:
    """A script that fills both nodes with long tasks (two more wait in the queue), makes an
    actor and a detached one, records each process's pid, then waits on the tasks."""
    code = textwrap.dedent(f"""
        import os, time
        import nbdist

        nbdist.init(address={address!r})
        marks = {str(marks)!r}

        def mark(name):
            with open(os.path.join(marks, name + ".tmp"), "w") as f:
                f.write(str(os.getpid()))
            os.replace(os.path.join(marks, name + ".tmp"), os.path.join(marks, name))

        @nbdist.remote
        def slow(i):
            mark(f"task-{{i}}")
            time.sleep(300)
            mark(f"done-{{i}}")

        @nbdist.remote
        class Keeper:
            def pid(self):
                return os.getpid()

        kept = Keeper.remote()
        detached = Keeper.options(name="stays", lifetime="detached").remote()
        pids = nbdist.get([kept.pid.remote(), detached.pid.remote()])
        with open(os.path.join(marks, "actors"), "w") as f:
            f.write(f"{{pids[0]}} {{pids[1]}}")
        refs = [slow.remote(i) for i in range(4)]
        print("waiting", flush=True)
        nbdist.get(refs)
    """)
    return subprocess.Popen([sys.executable, "-c", code], env=cli.env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _marked(marks: Path, prefix: str) -> list[str]:
    """The marks written whole (a mark is written as ``.tmp``, then renamed)."""
    return sorted(p.name for p in marks.glob(prefix + "*") if not p.name.endswith(".tmp"))


def _pid(marks: Path, name: str) -> int:
    return int((marks / name).read_text())


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "killed"])
def test_a_driver_that_goes_away_takes_its_tasks_and_actors_with_it(
        cli: Cli, tmp_path: Path, sig: signal.Signals) -> None:
    address = start_head(cli, "--num-cpus", "1")
    cli.run("start", "--address", address, "--num-cpus", "1")
    marks = tmp_path / "marks"
    marks.mkdir()
    driver = _driver(cli, address, marks)
    try:
        running = poll(lambda: names if len(names := _marked(marks, "task-")) == 2 else None,
                       timeout=90, what="two tasks running, one on each node")
        assert (marks / "actors").exists()
        workers = [_pid(marks, name) for name in running]
        kept, detached = map(int, (marks / "actors").read_text().split())
        nodes_before = cli.status()["nodes"]
        assert all(n["tasks"] > 0 for n in nodes_before), nodes_before  # spread over both
        driver.send_signal(sig)
        code = driver.wait(60)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert code == -sig, (code, driver.stderr.read() if driver.stderr else "")

    poll(lambda: not any(alive(pid) for pid in workers), timeout=60,
         what="the workers of the driver's running tasks to be stopped")
    poll(lambda: not alive(kept), timeout=60, what="the driver's actor to end")

    def idle() -> bool:
        nodes = cli.status()["nodes"]
        return all(n["tasks"] == 0 and n["resources_free"]["CPU"] == n["resources_total"]["CPU"]
                   for n in nodes)

    poll(idle, timeout=60, what="both nodes to have no task of the driver and every CPU free")
    # The two queued tasks never started, and the running ones never finished.
    assert sorted(p.name for p in marks.iterdir()) == sorted(["actors", *running])
    assert alive(detached)

    # The cluster serves the next driver; the detached actor is still there for it.
    after = cli.python(f"""
        import nbdist
        nbdist.init(address={address!r})

        @nbdist.remote
        def square(x):
            return x * x

        print(nbdist.get([square.remote(i) for i in range(4)]),
              nbdist.get(nbdist.get_actor("stays").pid.remote()))
    """)
    assert after.returncode == 0, after.stderr
    assert after.stdout.split("\n")[0] == f"[0, 1, 4, 9] {detached}"


def test_a_head_started_with_no_cpus_runs_no_tasks(cli: Cli) -> None:
    address = start_head(cli, "--num-cpus", "0", "--num-gpus", "0")
    head = cli.status()["nodes"][0]
    assert head["resources_total"]["CPU"] == 0.0 and "GPU" not in head["resources_total"]
    assert head["workers"] == 0
    cli.run("start", "--address", address, "--num-cpus", "1")
    driver = cli.python(f"""
        import nbdist
        nbdist.init(address={address!r})

        @nbdist.remote
        def where():
            return nbdist.get_runtime_context().get_node_id()

        @nbdist.remote
        class Where:
            def node(self):
                return nbdist.get_runtime_context().get_node_id()

        # Ray's default actor needs a CPU to be placed (none to run); num_cpus=0 needs none.
        print(nbdist.get(Where.options(num_cpus=0).remote().node.remote()),
              *[nbdist.get(Where.remote().node.remote()) for _ in range(2)])
        print(nbdist.get_runtime_context().get_node_id(), *set(nbdist.get(
            [where.remote() for _ in range(4)])))
    """)
    assert driver.returncode == 0, driver.stderr
    actors, tasks = driver.stdout.strip().split("\n")
    zero_cpu_actor, *default_actors = actors.split()
    here, *ran_on = tasks.split()
    nodes = cli.status()["nodes"]
    assert here == nodes[0]["node_id"] and ran_on == [nodes[1]["node_id"]]
    assert default_actors == [nodes[1]["node_id"]] * 2
    assert zero_cpu_actor == here  # placed where the driver's node is, as Ray places it


@pytest.mark.parametrize("args, error", [
    (("--num-cpus", "-1"), "--num-cpus must be 0 or more"),
    (("--num-gpus", "-2"), "--num-gpus must be 0 or more"),
    (("--object-store-memory", "0"), "--object-store-memory must be a positive number"),
])
def test_negative_or_empty_sizes_are_refused(cli: Cli, args: tuple[str, ...],
                                             error: str) -> None:
    done = cli.run("start", "--head", "--port", "0", *args, ok=False)
    assert done.returncode == 1 and error in done.stderr, done.stderr
    assert not cli.pids()  # nothing was started

"""Several node daemons on one machine, each with its own store, port and workers: work goes
where its resources are free, objects move between nodes on demand, and a node that dies has its
tasks run again elsewhere.

Drivers are scripts attached with ``init(address=...)``; every cluster is started with the
``nbdist`` command in a state directory of the test's own (the ``cli`` fixture stops it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from clusters import Cli, alive, start_head

pytestmark = [pytest.mark.timeout(120), pytest.mark.nbdist_only]


def _two_nodes(cli: Cli) -> str:
    address = start_head(cli, "--num-cpus", "1")
    cli.run("start", "--address", address, "--num-cpus", "2", "--resources", '{"beta": 1}')
    return address


@pytest.mark.parametrize("transfer", ["link", "tcp"])
def test_work_spreads_over_nodes_and_goes_where_its_resource_is(cli: Cli, transfer: str
                                                                ) -> None:
    # Nodes on one machine hand over large values as hard links; "tcp" makes them send the
    # bytes through the transport, as between machines.
    cli.env["NBDIST_SAME_HOST_LINKS"] = "1" if transfer == "link" else "0"
    address = _two_nodes(cli)
    driver = cli.python(f"""
        import numpy as np
        import nbdist

        nbdist.init(address={address!r})
        here = nbdist.get_runtime_context().get_node_id()

        @nbdist.remote
        def where(i):
            import time
            time.sleep(0.3)
            return i, nbdist.get_runtime_context().get_node_id()

        @nbdist.remote(resources={{"beta": 1}})
        def double(a):
            print("double got", a.shape, flush=True)
            return a * 2, nbdist.get_runtime_context().get_node_id()

        results = nbdist.get([where.remote(i) for i in range(6)])
        assert [r[0] for r in results] == list(range(6)), results
        nodes = {{r[1] for r in results}}
        assert len(nodes) == 2 and here in nodes, (nodes, here)  # 1 CPU here, 2 there

        arr = np.random.default_rng(7).random(5_000_000)  # 40 MB: through shared memory
        out, node = nbdist.get(double.remote(nbdist.put(arr)))
        assert node != here, "the beta task must run on the node that has beta"
        assert np.array_equal(out, arr * 2) and not out.flags.writeable

        # The records say where each task ran, so the workers are listed under their node.
        from polling import until
        from nbdist.util.state import list_workers

        def finished():
            return [e.node_id for e in nbdist.events.recent()
                    if type(e).__name__ == "TaskFinished" and e.name == "double"]

        assert until(finished, timeout=20) == [node], (finished(), node)
        assert until(lambda: {{w.node_id for w in list_workers()}} == nodes, timeout=20), (
            list_workers(), nodes)
        print("OK", len(nodes))
    """)
    assert driver.returncode == 0, driver.stderr + driver.stdout
    assert "OK 2" in driver.stdout
    # Output of a task on the other node reaches the driver, with the task's name.
    assert "(double pid=" in driver.stdout and "double got (5000000,)" in driver.stdout


def test_refs_made_on_another_node_reach_the_driver_and_are_freed(cli: Cli, wait_until) -> None:
    address = _two_nodes(cli)
    driver = cli.python(f"""
        import gc
        import numpy as np
        import nbdist

        nbdist.init(address={address!r})

        @nbdist.remote
        def ones(n):
            return np.ones(n)

        @nbdist.remote(resources={{"beta": 1}})
        def fan_out(refs):
            first = nbdist.get(refs[0])  # a ref made by the driver, fetched from its node
            return [ones.remote(len(first)), nbdist.put(float(first.sum()))]

        big = nbdist.put(np.arange(1_000_000.0))
        made = nbdist.get(fan_out.remote([big]))
        arr = nbdist.get(made[0])
        assert arr.shape == (1_000_000,) and arr.sum() == 1_000_000.0
        assert nbdist.get(made[1]) == float(np.arange(1_000_000.0).sum())
        del made, arr, big
        gc.collect()
        print("OK")
    """)
    assert driver.returncode == 0, driver.stderr + driver.stdout
    assert "OK" in driver.stdout

    def store_empty() -> bool:
        nodes = cli.status()["nodes"]
        return all(n["objects"] == 0 and n["object_store_used"] == 0 for n in nodes)

    wait_until(store_empty, timeout=10, what="every node to free the objects once no ref remains")


def test_a_killed_node_has_its_tasks_run_again_elsewhere(cli: Cli, tmp_path: Path) -> None:
    address = start_head(cli, "--num-cpus", "1")
    cli.run("start", "--address", address, "--num-cpus", "1")
    other = cli.status()["nodes"][1]  # the joined node (nodes are listed in join order)
    marks = str(tmp_path / "started")
    os.mkdir(marks)
    driver = cli.python(f"""
        import os, signal, sys, time
        import nbdist
        from polling import poll, until

        nbdist.init(address={address!r})
        here = nbdist.get_runtime_context().get_node_id()

        def both_started():
            return len(os.listdir({marks!r})) == 2

        @nbdist.remote
        def slow(i):
            print("started", i, nbdist.get_runtime_context().get_node_id(), flush=True)
            open(os.path.join({marks!r}, f"task-{{i}}"), "w").close()
            until(both_started, timeout=60)  # so that neither ends before the kill
            time.sleep(1.5)
            return i * 10, nbdist.get_runtime_context().get_node_id()

        refs = [slow.remote(i) for i in range(2)]
        poll(both_started, timeout=60, what="both tasks running: one here, one on the other node")
        os.kill({other["pid"]}, signal.SIGKILL)
        results = nbdist.get(refs, timeout=60)
        assert [r[0] for r in results] == [0, 10], results
        assert all(r[1] == here for r in results), results  # the lost one ran again here
        print("OK")
    """)
    assert driver.returncode == 0, driver.stderr + driver.stdout
    assert "OK" in driver.stdout
    started = [ln.split() for ln in driver.stdout.splitlines() if " started " in ln]
    assert len({s[-1] for s in started}) == 2, "one task must have started on the other node"
    assert len(started) == 3  # and once more after its node was killed
    assert not alive(other["pid"])
    nodes = {n["pid"]: n["alive"] for n in cli.status()["nodes"]}
    assert nodes[other["pid"]] is False


def test_a_task_waits_briefly_for_a_node_with_its_resource(cli: Cli) -> None:
    address = start_head(cli, "--num-cpus", "1")
    driver = cli.python(f"""
        import os, subprocess, sys
        import nbdist

        nbdist.init(address={address!r})

        @nbdist.remote(resources={{"gamma": 1}})
        def needs_gamma():
            return nbdist.get_runtime_context().get_node_id()

        ref = needs_gamma.remote()  # no node has gamma yet
        subprocess.run([os.path.join(os.path.dirname(sys.executable), "nbdist"), "start",
                        "--address", {address!r}, "--num-cpus", "1", "--resources",
                        '{{"gamma": 1}}'], check=True, capture_output=True)
        print("ran on", nbdist.get(ref, timeout=30))

        @nbdist.remote(resources={{"delta": 1}})
        def needs_delta():
            return 1

        try:
            nbdist.get(needs_delta.remote(), timeout=30)
        except ValueError as exc:
            print("refused:", exc)
    """)
    assert driver.returncode == 0, driver.stderr + driver.stdout
    nodes = cli.status()["nodes"]
    assert f"ran on {nodes[1]['node_id']}" in driver.stdout
    assert "refused: 'needs_delta' needs {CPU: 1, delta: 1} but no node has it" in driver.stdout


def test_results_outlive_the_node_that_made_them_and_its_own_objects_are_lost(
        cli: Cli) -> None:
    address = _two_nodes(cli)
    other = cli.status()["nodes"][1]["pid"]
    driver = cli.python(f"""
        import os, signal
        import numpy as np
        import nbdist
        from nbdist.exceptions import ObjectLostError
        from polling import poll

        nbdist.init(address={address!r})

        @nbdist.remote(resources={{"beta": 1}})
        def produce():
            return np.full(1_000_000, 3.0)  # a result: it belongs to the driver's node

        @nbdist.remote(resources={{"beta": 1}})
        def put_there():
            return [nbdist.put(np.full(1_000_000, 5.0))]  # that node's own object

        made = produce.remote()
        nbdist.wait([made])
        inner = nbdist.get(put_there.remote())[0]
        os.kill({other}, signal.SIGKILL)
        poll(lambda: not all(n["Alive"] for n in nbdist.nodes()), timeout=30,
             what="the killed node seen as dead")
        assert nbdist.get(made).sum() == 3_000_000.0  # nothing to rebuild: its owner has it
        try:
            nbdist.get(inner, timeout=20)
        except ObjectLostError as exc:
            print("lost:", exc)
        # And the cluster goes on without that node.
        print(nbdist.get(nbdist.remote(lambda: "still working").remote()))
    """)
    assert driver.returncode == 0, driver.stderr + driver.stdout
    assert "lost: Object" in driver.stdout and "still working" in driver.stdout


def test_tasks_on_another_node_call_an_actor_through_its_handle(cli: Cli) -> None:
    address = start_head(cli, "--num-cpus", "1")
    cli.run("start", "--address", address, "--num-cpus", "2")
    driver = cli.python(f"""
        import nbdist

        nbdist.init(address={address!r})
        here = nbdist.get_runtime_context().get_node_id()

        @nbdist.remote
        class ParameterServer:
            def __init__(self):
                self.value = 0
            def add(self, delta):
                self.value += delta
                return self.value
            def get(self):
                return self.value

        @nbdist.remote
        def worker(ps, n):
            for _ in range(n):
                nbdist.get(ps.add.remote(1))
            return nbdist.get_runtime_context().get_node_id()

        ps = ParameterServer.remote()  # takes the driver's node's one CPU
        nodes = nbdist.get([worker.remote(ps, 25) for _ in range(4)])
        assert nbdist.get(ps.get.remote()) == 100
        assert any(n != here for n in nodes), nodes  # the workers ran on the other node
        print("OK", len(set(nodes)))
    """)
    assert driver.returncode == 0, driver.stderr + driver.stdout
    assert "OK" in driver.stdout


def test_a_task_only_a_lost_node_could_run_fails_instead_of_waiting(cli: Cli,
                                                                    tmp_path) -> None:
    address = start_head(cli, "--num-cpus", "1")
    cli.run("start", "--address", address, "--num-cpus", "1", "--resources", '{"omega": 1}')
    other = cli.status()["nodes"][1]["pid"]
    marker = str(tmp_path / "started")
    driver = cli.python(f"""
        import os, signal, time
        import nbdist
        from polling import poll

        nbdist.init(address={address!r})

        @nbdist.remote(resources={{"omega": 1}})
        def only_there():
            open({marker!r}, "w").close()
            time.sleep(60)

        ref = only_there.remote()
        poll(lambda: os.path.exists({marker!r}), timeout=60, what="the task to start")
        os.kill({other}, signal.SIGKILL)
        try:
            nbdist.get(ref, timeout=40)
        except ValueError as exc:  # after the wait for a node with omega to join
            print("failed:", exc)
    """)
    assert driver.returncode == 0, driver.stderr + driver.stdout
    assert "failed: 'only_there' needs {CPU: 1, omega: 1}" in driver.stdout, driver.stdout

"""Lineage rebuild of generator values on a real two-node cluster: the values a generator task
(``num_returns="dynamic"`` and streaming) yielded on the other node are lost when that node is
killed, and a get of them runs the task again on the driver's node, which stores each value
under the ref of the same index (Ray 2.60's lineage reconstruction). A value fetched to the
driver's node before the loss is kept; a task without retries is not run again.
"""

from __future__ import annotations

import pytest
from clusters import Cli, start_head

pytestmark = [pytest.mark.timeout(120), pytest.mark.nbdist_only]


def test_generator_values_lost_with_their_node_are_rebuilt_by_running_the_task_again(
        cli: Cli) -> None:
    address = start_head(cli, "--num-cpus", "1")
    cli.run("start", "--address", address, "--num-cpus", "1")
    other = cli.status()["nodes"][1]  # the joined node (nodes are listed in join order)
    driver = cli.python(f"""
        import os, signal
        import numpy as np
        import nbdist
        from nbdist.exceptions import ObjectLostError
        from nbdist.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        from polling import poll

        nbdist.init(address={address!r})
        here = nbdist.get_runtime_context().get_node_id()
        there = {other["node_id"]!r}
        assert there != here
        on_other = NodeAffinitySchedulingStrategy(there, soft=True)

        @nbdist.remote(num_returns="dynamic", scheduling_strategy=on_other)
        def dynamic(n):
            node = nbdist.get_runtime_context().get_node_id()
            for i in range(n):
                yield i, node, np.full(200_000, float(i))  # 1.6 MB: in shared memory

        @nbdist.remote(scheduling_strategy=on_other)
        def streaming(n):
            node = nbdist.get_runtime_context().get_node_id()
            for i in range(n):
                yield i, node, np.full(200_000, 10.0 + i)

        @nbdist.remote(num_returns="dynamic", max_retries=0, scheduling_strategy=on_other)
        def no_retries():
            yield np.ones(200_000)

        @nbdist.remote(num_returns="dynamic", scheduling_strategy=on_other)
        def fails_at_two():
            yield np.zeros(200_000)
            yield np.ones(200_000)
            raise ValueError("stops at two")

        dyn = list(nbdist.get(dynamic.remote(3)))
        stream = list(streaming.remote(3))
        once = list(nbdist.get(no_retries.remote()))
        failing = list(nbdist.get(fails_at_two.remote()))
        assert len(dyn) == 3 and len(stream) == 3 and len(once) == 1 and len(failing) == 3
        kept = nbdist.get(dyn[0])  # copied to this node before the loss: nothing to rebuild
        assert kept[1] == there, kept[1]

        os.kill({other["pid"]}, signal.SIGKILL)
        poll(lambda: not all(n["Alive"] for n in nbdist.nodes()), timeout=30,
             what="the killed node seen as dead")

        values = nbdist.get(dyn, timeout=60)
        assert [v[0] for v in values] == [0, 1, 2], values
        assert values[0][1] == there and [v[1] for v in values[1:]] == [here, here], values
        assert all(v[2][0] == float(v[0]) and v[2].shape == (200_000,) for v in values)

        # A wait that needs them only to exist in the cluster waits for the rebuild too.
        ready, rest = nbdist.wait(stream, num_returns=3, timeout=60, fetch_local=False)
        assert ready == stream and rest == [], (ready, rest)
        streamed = nbdist.get(stream, timeout=60)
        assert [(v[0], v[1], v[2][-1]) for v in streamed] == [
            (i, here, 10.0 + i) for i in range(3)], [(v[0], v[1]) for v in streamed]

        assert nbdist.get(failing[1], timeout=60)[0] == 1.0
        try:
            nbdist.get(failing[2], timeout=60)
        except ValueError as exc:
            assert "stops at two" in str(exc), exc
            print("rebuilt error:", type(exc).__name__)

        try:
            nbdist.get(once[0], timeout=60)
        except ObjectLostError as exc:
            print("lost:", exc)
        print("OK")
    """)
    assert driver.returncode == 0, driver.stderr + driver.stdout
    assert "rebuilt error: " in driver.stdout
    assert "lost: Object" in driver.stdout  # max_retries=0: not run again
    assert "OK" in driver.stdout


def test_a_rerun_the_callers_node_cannot_run_goes_to_another_node(cli: Cli) -> None:
    # Only the two other nodes have "beta": the rerun goes to the one left, which sends the
    # values it made to the caller's node.
    address = start_head(cli, "--num-cpus", "1")
    for _ in range(2):
        cli.run("start", "--address", address, "--num-cpus", "1", "--resources", '{"beta": 1}')
    first, second = cli.status()["nodes"][1:]
    driver = cli.python(f"""
        import os, signal
        import numpy as np
        import nbdist
        from nbdist.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        from polling import poll

        nbdist.init(address={address!r})
        on_first = NodeAffinitySchedulingStrategy({first["node_id"]!r}, soft=True)

        @nbdist.remote(num_returns="dynamic", resources={{"beta": 1}},
                       scheduling_strategy=on_first)
        def dynamic(n):
            node = nbdist.get_runtime_context().get_node_id()
            for i in range(n):
                yield i, node, np.full(200_000, float(i))

        @nbdist.remote(resources={{"beta": 1}}, scheduling_strategy=on_first)
        def streaming(n):
            node = nbdist.get_runtime_context().get_node_id()
            for i in range(n):
                yield i, node

        dyn = list(nbdist.get(dynamic.remote(2)))
        stream = list(streaming.remote(2))
        os.kill({first["pid"]}, signal.SIGKILL)
        poll(lambda: not all(n["Alive"] for n in nbdist.nodes()), timeout=30,
             what="the killed node seen as dead")
        values = nbdist.get(dyn, timeout=60)
        assert [(v[0], v[1], v[2][-1]) for v in values] == [
            (0, {second["node_id"]!r}, 0.0), (1, {second["node_id"]!r}, 1.0)], values
        assert nbdist.get(stream, timeout=60) == [(0, {second["node_id"]!r}),
                                                  (1, {second["node_id"]!r})]
        print("OK")
    """)
    assert driver.returncode == 0, driver.stderr + driver.stdout
    assert "OK" in driver.stdout

"""``wait(fetch_local=False)`` on a real two-node cluster: an object made on the other node is
ready as soon as it exists there, and is not copied to the driver's node; with
``fetch_local=True`` (the default) ready means here, so it is fetched (Ray 2.60's meaning).

The driver's node's store is read through its ``node_info`` (the bytes its store holds).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from clusters import Cli, start_head

pytestmark = [pytest.mark.timeout(120), pytest.mark.nbdist_only]


def test_an_object_on_another_node_is_ready_without_fetch_local_and_stays_there(
        cli: Cli, tmp_path: Path) -> None:
    address = start_head(cli, "--num-cpus", "1")
    cli.run("start", "--address", address, "--num-cpus", "2", "--resources", '{"beta": 1}')
    go = str(tmp_path / "go")
    driver = cli.python(f"""
        import os
        import numpy as np
        import nbdist
        from nbdist.driver import runtime
        from polling import poll

        nbdist.init(address={address!r})

        def used_here():
            return runtime.current().control("node_info")["store_used"]

        @nbdist.remote(resources={{"beta": 1}})
        def late(n):
            poll(lambda: os.path.exists({go!r}), timeout=60, what="the driver's go")
            return np.full(n, 7.0)

        @nbdist.remote(resources={{"beta": 1}})
        def start(n):
            # Submitted on the beta node: its value is made and kept there.
            return [late.remote(n)]

        @nbdist.remote(resources={{"beta": 1}})
        def put_there(n):
            return [nbdist.put(np.full(n, 3.0))]

        before = used_here()
        made = nbdist.get(put_there.remote(5_000_000))[0]  # 40 MB in the other node's store
        ready, rest = nbdist.wait([made], timeout=60, fetch_local=False)
        assert ready == [made] and rest == [], (ready, rest)
        assert used_here() - before < 1_000_000, used_here() - before

        coming = nbdist.get(start.remote(5_000_000))[0]
        ready, rest = nbdist.wait([coming], timeout=0, fetch_local=False)
        assert ready == [] and rest == [coming], (ready, rest)
        ready, rest = nbdist.wait([coming], timeout=0.5, fetch_local=False)
        assert ready == [] and rest == [coming], "it does not exist yet"
        open({go!r}, "w").close()
        ready, rest = nbdist.wait([coming], timeout=60, fetch_local=False)
        assert ready == [coming], "it exists on the other node once the task returned"
        ready, rest = nbdist.wait([made, coming], num_returns=2, timeout=0, fetch_local=False)
        assert ready == [made, coming], ready
        assert used_here() - before < 1_000_000, ("nothing was copied here",
                                                  used_here() - before)

        # fetch_local=True: ready means here, so both are brought to this node.
        ready, rest = nbdist.wait([made, coming], num_returns=2, timeout=60)
        assert ready == [made, coming], (ready, rest)
        assert used_here() - before >= 80_000_000, used_here() - before
        assert nbdist.get(made)[0] == 3.0 and nbdist.get(coming)[-1] == 7.0
        print("OK")
    """)
    assert driver.returncode == 0, driver.stderr + driver.stdout
    assert "OK" in driver.stdout


def test_without_fetch_local_results_of_tasks_and_actor_calls_are_ready_when_made(
        cli: Cli, tmp_path: Path) -> None:
    go = str(tmp_path / "go")
    driver = cli.python(f"""
        import os
        import nbdist
        from polling import poll

        nbdist.init(num_cpus=2)

        @nbdist.remote
        def late():
            poll(lambda: os.path.exists({go!r}), timeout=60, what="the driver's go")
            return "task"

        @nbdist.remote
        class Counter:
            def __init__(self):
                self.n = 0
            def add(self):
                self.n += 1
                return self.n
            def add_late(self):
                poll(lambda: os.path.exists({go!r}), timeout=60, what="the driver's go")
                return self.add()

        counter = Counter.remote()
        nbdist.get(counter.add.remote())  # later calls go straight to the actor's worker
        calls = [counter.add_late.remote() for _ in range(3)]
        put = nbdist.put("put")
        task = late.remote()
        ready, rest = nbdist.wait([task, put, *calls], num_returns=5, timeout=0.5,
                                  fetch_local=False)
        assert rest == [task, *calls] and ready == [put], (ready, rest)
        open({go!r}, "w").close()
        ready, rest = nbdist.wait([task, put, *calls], num_returns=5, timeout=60,
                                  fetch_local=False)
        assert rest == [] and ready == [task, put, *calls], (ready, rest)
        assert nbdist.get([task, put, *calls]) == ["task", "put", 2, 3, 4]
        print("OK")
    """)
    assert driver.returncode == 0, driver.stderr + driver.stdout
    assert "OK" in driver.stdout

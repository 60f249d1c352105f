"""Actors across nodes: an actor runs on a node that has its resources (not only on its
creator's), keeps its calls in order there, and restarts on another node when its node is lost
and ``max_restarts`` allows; otherwise its calls raise ActorDiedError. Nothing hangs.

Clusters are started with the ``nbdist`` command (the ``cli`` fixture stops them); drivers are
scripts attached with ``init(address=...)``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from clusters import Cli, start_head

pytestmark = [pytest.mark.timeout(150), pytest.mark.nbdist_only]

COUNTER = """
    import os, signal, time
    import nbdist
    from polling import poll

    def node_pid(node_id):
        import json, subprocess, sys
        out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "nbdist"),
                              "status", "--json"], capture_output=True, text=True, check=True)
        return {n["node_id"]: n["pid"] for n in json.loads(out.stdout)["nodes"]}[node_id]

    @nbdist.remote(resources={"beta": 1})
    class Counter:
        def __init__(self, start=0):
            self.n = start
        def add(self, k):
            self.n += k
            return self.n
        def where(self):
            print("counting on", nbdist.get_runtime_context().get_node_id()[:12], flush=True)
            return nbdist.get_runtime_context().get_node_id(), os.getpid()
        def slow(self, seconds, started=None):
            if started:
                open(started, "w").close()
            time.sleep(seconds)
            return nbdist.get_runtime_context().get_node_id()
"""


def _driver(cli: Cli, address: str, body: str) -> str:
    import textwrap

    code = textwrap.dedent(COUNTER) + f"\nnbdist.init(address={address!r})\n" + \
        textwrap.dedent(body)
    done = cli.python(code, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


def _head_and_two_beta_nodes(cli: Cli) -> str:
    address = start_head(cli, "--num-cpus", "1")
    for _ in range(2):
        cli.run("start", "--address", address, "--num-cpus", "1", "--resources", '{"beta": 2}')
    return address


def test_an_actor_runs_on_the_node_with_its_resources(cli: Cli) -> None:
    address = start_head(cli, "--num-cpus", "1")
    cli.run("start", "--address", address, "--num-cpus", "2", "--resources", '{"beta": 3}')
    out = _driver(cli, address, """
        here = nbdist.get_runtime_context().get_node_id()
        c = Counter.remote(10)
        assert nbdist.get([c.add.remote(1) for _ in range(200)]) == list(range(11, 211))
        node, pid = nbdist.get(c.where.remote())
        assert node != here, "the actor must run on the node that has beta"
        print("actor node", node)

        @nbdist.remote
        def through(handle):  # a handle passed to a task on any node reaches the actor
            return nbdist.get(handle.add.remote(1000))

        assert nbdist.get(through.remote(c)) == 1210

        named = Counter.options(name="tally").remote()
        assert nbdist.get(nbdist.get_actor("tally").add.remote(5)) == 5

        class Broken:
            def __init__(self):
                raise ValueError("bad start")
            def f(self):
                return 1

        broken = nbdist.remote(resources={"beta": 1})(Broken).remote()
        try:
            nbdist.get(broken.f.remote(), timeout=60)
        except nbdist.exceptions.ActorDiedError as exc:
            assert "bad start" in str(exc), exc
            print("constructor error reported")

        nbdist.kill(c)
        try:
            nbdist.get(c.add.remote(1), timeout=60)
        except nbdist.exceptions.ActorDiedError:
            print("killed")
        status = nbdist.nodes()
        print("done")
    """)
    assert "counting on" in out and "constructor error reported" in out and "killed" in out
    nodes = cli.status()["nodes"]
    assert f"actor node {nodes[1]['node_id']}" in out
    assert f"counting on {nodes[1]['node_id'][:12]}" in out  # output reached the driver


def test_actors_spread_over_nodes_with_room(cli: Cli) -> None:
    address = start_head(cli, "--num-cpus", "1")
    cli.run("start", "--address", address, "--num-cpus", "2")
    out = _driver(cli, address, """
        @nbdist.remote(num_cpus=1)
        class Slot:
            def node(self):
                return nbdist.get_runtime_context().get_node_id()

        slots = [Slot.remote() for _ in range(3)]  # 1 CPU on the head's node, 2 on the other
        placed = nbdist.get([s.node.remote() for s in slots], timeout=60)
        print("nodes used", len(set(placed)))
        del slots
        again = [Slot.remote() for _ in range(3)]  # their CPUs came back
        print("again", len(set(nbdist.get([s.node.remote() for s in again], timeout=60))))
    """)
    assert "nodes used 2" in out and "again 2" in out


def test_an_actor_restarts_on_another_node_when_its_node_is_lost(
        cli: Cli, tmp_path: Path) -> None:
    address = _head_and_two_beta_nodes(cli)
    started = str(tmp_path / "started")
    out = _driver(cli, address, f"""
        keeps = Counter.options(max_restarts=1, max_task_retries=-1).remote()
        assert nbdist.get([keeps.add.remote(1) for _ in range(5)]) == [1, 2, 3, 4, 5]
        first, _ = nbdist.get(keeps.where.remote())
        running = keeps.slow.remote(2, {started!r})  # in flight when its node goes
        poll(lambda: os.path.exists({started!r}), timeout=60, what="the slow call to start")
        os.kill(node_pid(first), signal.SIGKILL)
        # The call in flight ran again on the restarted actor, elsewhere.
        second = nbdist.get(running, timeout=60)
        assert second != first, (first, second)
        assert nbdist.get(keeps.add.remote(1), timeout=60) == 1  # a new instance
        print("restarted elsewhere")

        # No restarts left: its calls fail clearly when this node goes too.
        os.kill(node_pid(second), signal.SIGKILL)
        try:
            nbdist.get(keeps.add.remote(1), timeout=60)
        except nbdist.exceptions.ActorDiedError as exc:
            assert "was lost" in str(exc), exc
            print("died for good")
    """)
    assert "restarted elsewhere" in out and "died for good" in out


def test_a_restart_in_the_hosting_process_counts_against_max_restarts(cli: Cli) -> None:
    address = _head_and_two_beta_nodes(cli)
    out = _driver(cli, address, """
        once = Counter.options(max_restarts=1).remote(7)
        node, pid = nbdist.get(once.where.remote())
        os.kill(pid, signal.SIGKILL)  # its process: restarted on the same node

        def add_one():
            try:
                return nbdist.get(once.add.remote(1), timeout=60)
            except nbdist.exceptions.ActorDiedError:  # the call that met the crash
                return None

        value = poll(add_one, timeout=60, what="a call the restarted actor answers")
        assert value == 8, value
        assert nbdist.get(once.where.remote())[0] == node
        print("restarted in place")
        os.kill(node_pid(node), signal.SIGKILL)  # the one restart is used: no move
        try:
            nbdist.get(once.add.remote(1), timeout=60)
        except nbdist.exceptions.ActorDiedError:
            print("no restart left")
    """)
    assert "restarted in place" in out and "no restart left" in out

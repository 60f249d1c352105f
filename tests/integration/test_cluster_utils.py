"""``nbdist.cluster_utils.Cluster``: several real nodes on one machine, added and removed by a
script as Ray's tests do, and nothing left behind however the script ends.

Each script runs in its own process with a state directory of the test's own (the ``cli``
fixture), so what it starts is found by ``nbdist status`` / ``nbdist stop`` there.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from clusters import Cli, alive
from polling import poll

pytestmark = [pytest.mark.timeout(180), pytest.mark.nbdist_only]


def test_nodes_are_added_used_and_removed_as_in_rays_tests(cli: Cli) -> None:
    done = cli.python("""
        import os
        import nbdist as ray
        from nbdist.cluster_utils import Cluster
        from polling import until

        try:
            Cluster(connect=True)
        except RuntimeError as exc:
            print("no head:", exc)
        cluster = Cluster(initialize_head=True, connect=True, head_node_args={"num_cpus": 1})
        head = cluster.head_node
        beta = cluster.add_node(num_cpus=2, resources={"beta": 1})
        gamma = cluster.add_node(num_cpus=1, resources={"gamma": 1}, _system_config={})
        cluster.wait_for_nodes()
        assert cluster.list_all_nodes() == [head, beta, gamma], cluster.list_all_nodes()
        assert cluster.worker_nodes == {beta, gamma} and head.head and not beta.head
        assert ray.get_runtime_context().get_node_id() == head.node_id  # on the head node
        assert ray.cluster_resources()["CPU"] == 4.0
        assert {n["NodeID"] for n in ray.nodes()} == {head.node_id, beta.node_id, gamma.node_id}

        @ray.remote
        def where():
            return ray.get_runtime_context().get_node_id()

        assert ray.get(where.options(resources={"beta": 1}).remote()) == beta.node_id
        assert ray.get(where.options(resources={"gamma": 1}).remote()) == gamma.node_id

        cluster.remove_node(gamma)
        cluster.wait_for_nodes()
        alive = {n["NodeID"]: n["Alive"] for n in ray.nodes()}
        assert alive == {head.node_id: True, beta.node_id: True, gamma.node_id: False}, alive
        assert not gamma.remaining_processes_alive() and beta.remaining_processes_alive()
        assert until(lambda: ray.cluster_resources()["CPU"] == 3.0, timeout=30), (
            ray.cluster_resources())

        try:
            cluster.add_node(num_cpu=1)
        except TypeError as exc:
            print("typo:", exc)
        try:
            cluster.remove_node(head)
        except ValueError as exc:
            print("attached:", exc)
        assert not ray.is_initialized()
        cluster.connect()
        assert ray.get(where.options(resources={"beta": 1}).remote()) == beta.node_id
        with open(os.environ["PIDS"], "w") as f:
            f.write(" ".join(str(p) for n in cluster.list_all_nodes() for p in n.all_processes))
        cluster.shutdown()
        assert not ray.is_initialized() and cluster.address is None
        print("OK")
    """, env={"PIDS": str(cli.state.parent / "pids")}, timeout=150)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "OK" in done.stdout
    assert "no head: Cannot connect to a cluster whose head is not started" in done.stdout
    assert "typo: add_node() got unexpected argument(s) num_cpu" in done.stdout
    assert "attached: Removing the node this driver is attached to" in done.stdout
    pids = [int(p) for p in (cli.state.parent / "pids").read_text().split()]
    assert len(pids) == 3 and not any(alive(p) for p in pids)  # head, head's node, beta
    assert list(cli.state.iterdir()) == []  # shutdown removed their folders


def test_a_removed_nodes_task_runs_again_on_another(cli: Cli, tmp_path: Path) -> None:
    marks = tmp_path / "marks"  # the task's marks alone (cli keeps its state in tmp_path too)
    marks.mkdir()
    gate = tmp_path / "removed"  # made once the node is gone: the tasks hold until then
    done = cli.python(f"""
        import os
        import nbdist as ray
        from nbdist.cluster_utils import Cluster
        from polling import poll, until

        cluster = Cluster(initialize_head=True, head_node_args={{"num_cpus": 1}})
        other = cluster.add_node(num_cpus=1)
        ray.init(address=cluster.address)
        marks = {str(marks)!r}
        gate = {str(gate)!r}

        @ray.remote(max_retries=1)
        def slow(i):
            open(os.path.join(marks, f"{{i}}-{{os.getpid()}}"), "w").close()
            until(lambda: os.path.exists(gate), timeout=60)  # held until the removal
            return ray.get_runtime_context().get_node_id()

        refs = [slow.remote(i) for i in range(2)]
        until(lambda: len(os.listdir(marks)) == 2, timeout=60)
        cluster.remove_node(other, allow_graceful=False)
        open(gate, "w").close()
        print(sorted(ray.get(refs, timeout=60)) == [cluster.head_node.node_id] * 2)
        ray.shutdown()
        cluster.shutdown()
    """, timeout=150)
    assert done.returncode == 0, done.stderr + done.stdout
    assert done.stdout.split() == ["True"]
    assert len(list(marks.iterdir())) == 3  # one task ran twice


@pytest.mark.parametrize("end", ["killed", "exits without shutdown"])
def test_every_process_ends_with_the_script(cli: Cli, end: str) -> None:
    code = textwrap.dedent("""
        import sys
        from nbdist.cluster_utils import Cluster

        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        cluster.add_node(num_cpus=1)
        cluster.add_node(num_cpus=1, object_store_memory=100 * 2**20)
        cluster.wait_for_nodes()
        print(" ".join(str(p) for n in cluster.list_all_nodes() for p in n.all_processes),
              flush=True)
        sys.stdin.readline()  # the test says when to end (or kills it first)
    """)
    script = subprocess.Popen([sys.executable, "-c", code], env=cli.env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    try:
        assert script.stdout is not None
        line = script.stdout.readline()
        pids = [int(p) for p in line.split()]
        assert len(pids) == 4, (line, script.stderr.read() if script.poll() is not None else "")
        assert all(alive(p) for p in pids)
        assert len(cli.status()["nodes"]) == 3
        if end == "killed":
            script.send_signal(signal.SIGKILL)
        else:
            assert script.stdin is not None
            script.stdin.write("end\n")
            script.stdin.flush()
        assert script.wait(90) == (-signal.SIGKILL if end == "killed" else 0)
    finally:
        if script.poll() is None:
            script.kill()
            script.wait()
    poll(lambda: not any(alive(p) for p in pids), timeout=60,
         what="the cluster's processes to end with the script that made it")
    if end == "killed":  # its folders remain for `nbdist stop`, which says they were dead
        out = cli.run("stop").stdout
        assert out.count("whose processes had already exited") == 3, out
    assert list(cli.state.iterdir()) == []
    assert json.loads(cli.run("status", "--json", ok=False).stdout or "null") is None

"""Task semantics: argument resolution, multiple returns, wait, nested tasks, resources,
runtime context, and user modules imported by reference in workers."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from polling import until

import nbdist

pytestmark = pytest.mark.timeout(60)


@nbdist.remote
def describe(top, items, mapping, *, keyword=None):
    def kind(value):
        if isinstance(value, nbdist.ObjectRef):
            return ("ref", nbdist.get(value))
        return ("value", value)

    return (
        kind(top),
        [kind(v) for v in items],
        {k: kind(v) for k, v in mapping.items()},
        kind(keyword),
    )


@pytest.mark.usefixtures("cluster")
def test_top_level_refs_are_resolved_nested_refs_are_not() -> None:
    a, b, c, d = (nbdist.put(v) for v in ("a", "b", "c", "d"))
    top, items, mapping, keyword = nbdist.get(describe.remote(a, [b, 5], {"k": c}, keyword=d))
    assert top == ("value", "a")
    assert keyword == ("value", "d")
    assert items == [("ref", "b"), ("value", 5)]
    assert mapping == {"k": ("ref", "c")}


@nbdist.remote
def identity(x):
    return x


@pytest.mark.usefixtures("cluster")
def test_task_output_ref_is_resolved_as_argument() -> None:
    ref = identity.remote(identity.remote(41))
    assert nbdist.get(ref) == 41


@pytest.mark.usefixtures("cluster")
def test_get_of_a_list_keeps_order_and_single_ref_gives_value() -> None:
    refs = [identity.remote(i) for i in range(20)]
    assert nbdist.get(refs) == list(range(20))
    assert nbdist.get(refs[7]) == 7
    assert isinstance(refs[0], nbdist.ObjectRef)


@nbdist.remote(num_returns=3)
def three(x):
    return x, x + 1, x + 2


@pytest.mark.usefixtures("cluster")
def test_num_returns() -> None:
    refs = three.remote(10)
    assert len(refs) == 3
    assert nbdist.get(list(refs)) == [10, 11, 12]

    first, second = identity.options(num_returns=2).remote(("x", "y"))
    assert nbdist.get(second) == "y"
    assert nbdist.get(first) == "x"


@nbdist.remote
def wait_for_file(path: str) -> str:
    if not until(lambda: os.path.exists(path), timeout=50):
        raise TimeoutError(f"{path} never appeared")
    return path


@pytest.mark.usefixtures("cluster")
def test_wait_splits_ready_and_pending(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    blocked = [wait_for_file.remote(str(gate)) for _ in range(2)]
    quick = [identity.remote(i) for i in range(3)]
    everything = [blocked[0], quick[0], blocked[1], quick[1], quick[2]]

    ready, pending = nbdist.wait(everything, num_returns=3)
    assert ready == [quick[0], quick[1], quick[2]]  # ready keeps the order of the input list
    assert pending == blocked

    ready, pending = nbdist.wait(everything, num_returns=4, timeout=0.2)
    assert len(ready) == 3 and len(pending) == 2

    gate.touch()
    ready, pending = nbdist.wait(everything, num_returns=5)
    assert ready == everything and pending == []


@pytest.mark.usefixtures("cluster")
def test_gpu_task_runs_when_gpu_is_declared() -> None:
    assert nbdist.get(identity.options(num_gpus=1).remote("gpu"), timeout=30) == "gpu"


@nbdist.remote
def hold(started: str, gate: str) -> str:
    Path(started).touch()
    if not until(lambda: os.path.exists(gate), timeout=50):
        raise TimeoutError("gate never opened")
    return "released"


@pytest.mark.usefixtures("cluster")
def test_cluster_and_available_resources(tmp_path: Path, wait_until) -> None:
    total = nbdist.cluster_resources()
    assert total["CPU"] == 4
    assert total["GPU"] == 1
    wait_until(lambda: nbdist.available_resources().get("CPU") == 4, what="all 4 CPUs to be free")

    started = tmp_path / "started"
    gate = tmp_path / "gate"
    held = hold.options(num_cpus=3).remote(str(started), str(gate))
    try:
        wait_until(started.exists, timeout=30, what="the 3-CPU task to start")
        wait_until(
            lambda: nbdist.available_resources().get("CPU", 0) == 1,
            what="available CPU to drop to 1 while a 3-CPU task runs",
        )
        assert nbdist.cluster_resources()["CPU"] == 4
    finally:
        gate.touch()
    assert nbdist.get(held) == "released"
    wait_until(lambda: nbdist.available_resources().get("CPU") == 4, what="the 3 CPUs to come back")


@pytest.mark.usefixtures("cluster")
def test_nodes_lists_one_live_node() -> None:
    nodes = nbdist.nodes()
    assert len(nodes) == 1
    assert nodes[0]["Alive"] is True
    assert nodes[0]["Resources"]["CPU"] == 4


@nbdist.remote
def task_context() -> dict:
    ctx = nbdist.get_runtime_context()
    return {
        "job": ctx.get_job_id(),
        "task": ctx.get_task_id(),
        "node": ctx.get_node_id(),
        "actor": ctx.get_actor_id(),
    }


@nbdist.remote
class ContextActor:
    def context(self) -> dict:
        ctx = nbdist.get_runtime_context()
        return {"task": ctx.get_task_id(), "actor": ctx.get_actor_id()}


@pytest.mark.usefixtures("cluster")
def test_runtime_context() -> None:
    driver = nbdist.get_runtime_context()
    first, second = nbdist.get([task_context.remote(), task_context.remote()])

    assert first["job"] == second["job"] == driver.get_job_id()
    assert first["node"] == driver.get_node_id() == nbdist.nodes()[0]["NodeID"]
    assert first["task"] and second["task"] and first["task"] != second["task"]
    assert first["actor"] is None

    actor = ContextActor.remote()
    in_actor = nbdist.get(actor.context.remote())
    assert isinstance(in_actor["actor"], str) and in_actor["actor"]
    assert in_actor["task"] and in_actor["task"] not in (first["task"], second["task"])


@nbdist.remote
def leaf(x: int) -> int:
    return x * 10


@nbdist.remote
def middle(x: int) -> int:
    return sum(nbdist.get([leaf.remote(x + i) for i in range(3)]))


@nbdist.remote
def outer(n: int) -> list[int]:
    return nbdist.get([middle.remote(i) for i in range(n)])


@pytest.mark.usefixtures("small_cluster")
def test_nested_fan_out_wider_than_cpus_does_not_deadlock() -> None:
    # 2 CPUs; every level blocks in get on more tasks than there are CPUs, which only
    # finishes if a worker blocked in get gives its CPU back.
    expected = [sum((i + j) * 10 for j in range(3)) for i in range(4)]
    assert nbdist.get([outer.remote(4) for _ in range(2)]) == [expected, expected]


@nbdist.remote
def span(seconds: float) -> tuple[float, float]:
    start = time.time()
    time.sleep(seconds)
    return start, time.time()


@pytest.mark.usefixtures("small_cluster")
def test_custom_resource_limits_concurrency() -> None:
    spans = nbdist.get([span.options(resources={"special": 1}).remote(0.3) for _ in range(4)])
    spans.sort()
    for (_, previous_end), (next_start, _) in zip(spans, spans[1:], strict=False):
        assert next_start >= previous_end, f"two 'special' tasks overlapped: {spans}"


@pytest.mark.usefixtures("small_cluster")
def test_cpu_requirement_limits_concurrency() -> None:
    spans = nbdist.get([span.options(num_cpus=2).remote(0.3) for _ in range(3)])
    spans.sort()
    for (_, previous_end), (next_start, _) in zip(spans, spans[1:], strict=False):
        assert next_start >= previous_end, f"two 2-CPU tasks overlapped on 2 CPUs: {spans}"


@pytest.mark.usefixtures("small_cluster")
def test_gpu_task_on_a_cluster_without_gpus_fails_clearly() -> None:
    # nbdist fails an infeasible request at once instead of leaving it pending forever
    # (docs/ray-compatibility.md); CPU work is unaffected.
    gpu_ref = identity.options(num_gpus=1).remote("gpu")
    assert nbdist.get(identity.remote("cpu")) == "cpu"
    with pytest.raises(ValueError, match="GPU") as info:
        nbdist.get(gpu_ref, timeout=30)
    assert "cluster has" in str(info.value)


@pytest.mark.usefixtures("small_cluster")
def test_resources_of_the_small_cluster() -> None:
    total = nbdist.cluster_resources()
    assert total["CPU"] == 2
    assert total["special"] == 1
    assert total.get("GPU", 0) == 0


@pytest.mark.timeout(120)
def test_script_modules_are_imported_by_reference_in_workers(tmp_path: Path) -> None:
    # A user's script imports a sibling module; workers must find it the way the driver did.
    (tmp_path / "helpers.py").write_text(
        textwrap.dedent(
            """
            class Point:
                def __init__(self, x, y):
                    self.x, self.y = x, y

            def norm1(p):
                return abs(p.x) + abs(p.y)
            """
        )
    )
    (tmp_path / "script.py").write_text(
        textwrap.dedent(
            """
            import nbdist
            import helpers

            nbdist.init(num_cpus=1)

            @nbdist.remote
            def measure(p):
                return helpers.norm1(p), type(p).__module__

            remote_norm = nbdist.remote(helpers.norm1)
            print(nbdist.get(measure.remote(helpers.Point(3, -4))))
            print(nbdist.get(remote_norm.remote(helpers.Point(1, 2))))
            nbdist.shutdown()
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "script.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-2:] == ["(7, 'helpers')", "3"], done.stdout

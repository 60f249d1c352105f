"""Cluster resources, nodes and runtime context, on both backends (2 CPUs, special=1)."""

from __future__ import annotations

import time

import pytest

import nbdist

pytestmark = pytest.mark.timeout(180)


@nbdist.remote(num_cpus=2)
def hold(seconds):
    time.sleep(seconds)
    return True


def test_cluster_resources(backend) -> None:
    total = nbdist.cluster_resources()
    assert total["CPU"] == 2.0
    assert total["special"] == 1.0
    assert total.get("GPU", 0) == 0


def test_available_resources_drop_while_a_task_holds_them(backend, wait_until) -> None:
    wait_until(lambda: nbdist.available_resources().get("CPU", 0) == 2.0, timeout=30,
               what="both CPUs free")
    ref = hold.remote(3)
    wait_until(lambda: nbdist.available_resources().get("CPU", 0) == 0, timeout=30,
               what="the task to hold both CPUs")
    assert nbdist.get(ref)
    wait_until(lambda: nbdist.available_resources().get("CPU", 0) == 2.0, timeout=30,
               what="both CPUs free again")


def test_nodes_lists_one_live_node_with_its_resources(backend) -> None:
    nodes = nbdist.nodes()
    assert len(nodes) == 1
    node = nodes[0]
    assert node["Alive"] and node["alive"]
    assert node["Resources"]["CPU"] == 2.0
    assert node["NodeID"] == nbdist.get_runtime_context().get_node_id()


def test_runtime_context_of_the_driver(backend) -> None:
    ctx = nbdist.get_runtime_context()
    assert ctx.get_task_id() is None and ctx.task_id is None
    assert ctx.get_actor_id() is None
    assert ctx.get_job_id() == ctx.job_id.hex()
    assert set(ctx.get()) == {"job_id", "node_id", "namespace"}


def test_is_initialized_and_reinit(backend) -> None:
    assert nbdist.is_initialized()
    with pytest.raises(RuntimeError, match="already"):
        nbdist.init()
    with pytest.raises(RuntimeError, match="already"):
        nbdist.init(backend="ray" if backend == "nbdist" else "nbdist")
    assert nbdist.init(ignore_reinit_error=True) is not None

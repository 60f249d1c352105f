"""Placement groups and scheduling strategies on several node daemons (three on one machine,
one CPU each, started with the ``nbdist`` command): bundles reserved on distinct nodes,
SPREAD, node affinity, resources returned on removal, a node lost under a group; and GPU ids
on a node that declares GPUs.

Drivers are scripts attached with ``init(address=...)``; the ``cli`` fixture stops the cluster.
"""

from __future__ import annotations

import pytest
from clusters import Cli, start_head

pytestmark = [pytest.mark.timeout(180), pytest.mark.nbdist_only]

PRELUDE = """
import os, signal, time
import nbdist
from polling import poll
from nbdist.util.placement_group import (
    placement_group, placement_group_table, remove_placement_group)
from nbdist.util.scheduling_strategies import (
    NodeAffinitySchedulingStrategy, PlacementGroupSchedulingStrategy)

nbdist.init(address={address!r})

@nbdist.remote(num_cpus=0)
def where(*_):
    return nbdist.get_runtime_context().get_node_id()

def node_of(pg, index):
    return nbdist.get(where.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
        pg, placement_group_bundle_index=index)).remote(), timeout=60)
"""


def _three_nodes(cli: Cli) -> str:
    address = start_head(cli, "--num-cpus", "1")
    for _ in range(2):
        cli.run("start", "--address", address, "--num-cpus", "1")
    return address


def _run(cli: Cli, address: str, body: str) -> str:
    driver = cli.python(PRELUDE.format(address=address) + body, timeout=150)
    assert driver.returncode == 0, driver.stderr + driver.stdout
    assert "OK" in driver.stdout, driver.stdout
    return driver.stdout


def test_strict_spread_and_spread_place_bundles_on_distinct_nodes(cli: Cli) -> None:
    address = _three_nodes(cli)
    _run(cli, address, """
ids = sorted(n["NodeID"] for n in nbdist.nodes())
pg = placement_group([{"CPU": 1}] * 3, strategy="STRICT_SPREAD")
assert pg.wait(60)
placed = placement_group_table(pg)["bundles_to_node_id"]
assert sorted(placed.values()) == ids, (placed, ids)
assert [node_of(pg, i) for i in range(3)] == [placed[i] for i in range(3)]
assert nbdist.available_resources().get("CPU", 0) == 0

# One bundle more than there are nodes: it waits (nodes may join), as Ray's does.
too_many = placement_group([{"CPU": 0.1}] * 4, strategy="STRICT_SPREAD")
assert not too_many.wait(1)
assert placement_group_table(too_many)["state"] == "PENDING"
remove_placement_group(too_many)

remove_placement_group(pg)
poll(lambda: nbdist.available_resources().get("CPU", 0) == 3, timeout=30,
     what="the three CPUs back after removal")

# SPREAD puts small bundles on different nodes where PACK would put them on one.
spread = placement_group([{"CPU": 0.5}] * 3, strategy="SPREAD")
pack = placement_group([{"CPU": 0.25}] * 2, strategy="STRICT_PACK")
assert spread.wait(60) and pack.wait(60)
assert len(set(placement_group_table(spread)["bundles_to_node_id"].values())) == 3
assert len(set(placement_group_table(pack)["bundles_to_node_id"].values())) == 1
print("OK")
""")


def test_spread_tasks_use_every_node(cli: Cli) -> None:
    address = _three_nodes(cli)
    _run(cli, address, """
ids = sorted(n["NodeID"] for n in nbdist.nodes())
counts = {}
for node in nbdist.get([where.options(scheduling_strategy="SPREAD").remote(i)
                        for i in range(6)], timeout=60):
    counts[node] = counts.get(node, 0) + 1
assert sorted(counts) == ids and set(counts.values()) == {2}, counts
print("OK")
""")


def test_node_affinity_hard_fails_when_its_node_is_gone_and_soft_falls_back(cli: Cli) -> None:
    address = _three_nodes(cli)
    _run(cli, address, """
here = nbdist.get_runtime_context().get_node_id()
other = [n for n in nbdist.nodes() if n["NodeID"] != here][0]
hard = NodeAffinitySchedulingStrategy(other["NodeID"], soft=False)
soft = NodeAffinitySchedulingStrategy(other["NodeID"], soft=True)
assert nbdist.get(where.options(scheduling_strategy=hard).remote(), timeout=60) == other["NodeID"]
assert nbdist.get(where.options(scheduling_strategy=soft).remote(), timeout=60) == other["NodeID"]

os.kill(other["Pid"], signal.SIGKILL)
poll(lambda: not [n for n in nbdist.nodes() if n["NodeID"] == other["NodeID"]][0]["Alive"],
     timeout=30, what="the head to see the node gone")
try:
    nbdist.get(where.options(scheduling_strategy=hard).remote(), timeout=60)
    raise AssertionError("a task pinned to a dead node ran")
except ValueError as exc:
    print("refused:", exc)
ran = nbdist.get(where.options(scheduling_strategy=soft).remote(), timeout=60)
assert ran != other["NodeID"], ran
print("OK")
""")


def test_a_node_lost_under_a_group_has_its_bundle_placed_again(cli: Cli) -> None:
    address = _three_nodes(cli)
    _run(cli, address, """
here = nbdist.get_runtime_context().get_node_id()
pids = {n["NodeID"]: n["Pid"] for n in nbdist.nodes()}
pg = placement_group([{"CPU": 1}] * 2, strategy="STRICT_SPREAD")
assert pg.wait(60)
placed = placement_group_table(pg)["bundles_to_node_id"]
lost_index = 0 if placed[0] != here else 1
lost = placed[lost_index]

@nbdist.remote
class Member:
    def node(self):
        return nbdist.get_runtime_context().get_node_id()

member = Member.options(max_restarts=1, max_task_retries=1,
                        scheduling_strategy=PlacementGroupSchedulingStrategy(
                            pg, placement_group_bundle_index=lost_index)).remote()
assert nbdist.get(member.node.remote(), timeout=60) == lost
os.kill(pids[lost], signal.SIGKILL)

def moved():
    row = placement_group_table(pg)
    return row["state"] == "CREATED" and row["bundles_to_node_id"].get(lost_index) not in (
        None, lost)

poll(moved, timeout=60, what="the lost bundle placed on the third node")
now = placement_group_table(pg)["bundles_to_node_id"]
assert now[1 - lost_index] == placed[1 - lost_index]  # the other bundle stayed
assert node_of(pg, lost_index) == now[lost_index]
assert nbdist.get(member.node.remote(), timeout=60) == now[lost_index]  # restarted there
print("OK")
""")


def test_gpu_ids_and_cuda_visible_devices_follow_the_gpus_given(cli: Cli) -> None:
    driver = cli.python("""
        import os
        import nbdist
        from nbdist.util.placement_group import placement_group
        from nbdist.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        nbdist.init(num_cpus=1, num_gpus=2)

        @nbdist.remote(num_gpus=2)
        def two():
            return nbdist.get_gpu_ids(), os.environ.get("CUDA_VISIBLE_DEVICES"), os.getpid()

        @nbdist.remote(num_gpus=0)
        def none():
            return nbdist.get_gpu_ids(), os.environ.get("CUDA_VISIBLE_DEVICES"), os.getpid()

        @nbdist.remote(num_cpus=0, num_gpus=1)
        class Trainer:
            def gpus(self):
                return nbdist.get_gpu_ids(), os.environ.get("CUDA_VISIBLE_DEVICES")

        @nbdist.remote(num_gpus=1)
        def one():
            return nbdist.get_gpu_ids(), os.environ.get("CUDA_VISIBLE_DEVICES"), os.getpid()

        ids, env, pid = nbdist.get(two.remote())
        assert ids == [0, 1] and env == "0,1", (ids, env)
        # The idle GPU worker runs the next GPU task, with the devices of that task alone.
        ids, env, pid1 = nbdist.get(one.remote())
        assert pid1 == pid and len(ids) == 1 and env == str(ids[0]), (ids, env)
        # A task without GPUs never runs in a GPU task's worker (as Ray's), and sees none.
        ids, env, pid2 = nbdist.get(none.remote())
        assert pid2 != pid and ids == [] and env is None, (ids, env)
        assert nbdist.get_gpu_ids() == []

        pg = placement_group([{"GPU": 1}, {"GPU": 1}], strategy="PACK")
        assert pg.wait(60)
        trainers = [Trainer.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
            pg, placement_group_bundle_index=i)).remote() for i in range(2)]
        got = nbdist.get([t.gpus.remote() for t in trainers], timeout=60)
        assert sorted(g[0][0] for g in got) == [0, 1], got
        assert all(env == str(ids[0]) for ids, env in got), got
        print("OK")
    """)
    assert driver.returncode == 0, driver.stderr + driver.stdout
    assert "OK" in driver.stdout


def test_a_detached_group_outlives_its_driver_and_others_go_with_theirs(cli: Cli) -> None:
    address = start_head(cli, "--num-cpus", "2")
    _run(cli, address, """
kept = placement_group([{"CPU": 1}], name="kept", lifetime="detached")
gone = placement_group([{"CPU": 1}], name="gone")
assert kept.wait(60) and gone.wait(60)
print("OK")
""")
    _run(cli, address, """
from nbdist.util.placement_group import get_placement_group
kept = get_placement_group("kept")
assert placement_group_table(kept)["state"] == "CREATED"
poll(lambda: nbdist.available_resources().get("CPU", 0) == 1, timeout=30,
     what="the CPU of the group that went with its driver back")
try:
    get_placement_group("gone")
    raise AssertionError("a group outlived the driver that made it")
except ValueError:
    pass
remove_placement_group(kept)
print("OK")
""")


def test_a_group_no_node_can_hold_waits_for_one_that_joins(cli: Cli) -> None:
    address = start_head(cli, "--num-cpus", "1")
    _run(cli, address, f"""
import subprocess, sys
here = nbdist.get_runtime_context().get_node_id()
pg = placement_group([{{"CPU": 1, "gamma": 1}}])
assert not pg.wait(0.5)
assert placement_group_table(pg)["state"] == "PENDING"
subprocess.run([os.path.join(os.path.dirname(sys.executable), "nbdist"), "start", "--address",
                {address!r}, "--num-cpus", "1", "--resources", '{{"gamma": 1}}'],
               check=True, capture_output=True)
assert pg.wait(60)
assert node_of(pg, 0) != here
print("OK")
""")

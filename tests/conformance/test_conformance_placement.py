"""Placement groups and scheduling strategies, on both backends (one node: 2 CPUs,
special=1). Multi-node behaviour (STRICT_SPREAD, SPREAD, a node lost under a group) is in
tests/integration/test_placement_groups.py."""

from __future__ import annotations

import sys
import time

import pytest

import nbdist
from nbdist.exceptions import ActorDiedError, GetTimeoutError, NbdistError
from nbdist.util.placement_group import (
    PlacementGroup,
    get_current_placement_group,
    get_placement_group,
    placement_group,
    placement_group_table,
    remove_placement_group,
)
from nbdist.util.scheduling_strategies import (
    NodeAffinitySchedulingStrategy,
    PlacementGroupSchedulingStrategy,
)

pytestmark = pytest.mark.timeout(180)


@nbdist.remote
def current_group():
    pg = get_current_placement_group()
    return None if pg is None else pg.id.hex()


@nbdist.remote
def parent_and_child():
    return current_group_id(), nbdist.get(current_group.remote())


def current_group_id():
    pg = get_current_placement_group()
    return None if pg is None else pg.id.hex()


@nbdist.remote
def look_up(name):
    return get_placement_group(name).id.hex()


@nbdist.remote
def sleeper(seconds):
    time.sleep(seconds)
    return True


@nbdist.remote
class Holder:
    def group(self):
        pg = get_current_placement_group()
        return None if pg is None else pg.id.hex()

    def gpus(self):
        return nbdist.get_gpu_ids()


def _free_cpus():
    return nbdist.available_resources().get("CPU", 0.0)


def test_util_placement_group_is_the_function_and_the_module(backend) -> None:
    module = sys.modules["nbdist.util.placement_group"]
    assert callable(nbdist.util.placement_group)
    assert nbdist.util.placement_group is module.placement_group is placement_group
    assert module.PlacementGroup is PlacementGroup


def test_a_group_reserves_its_bundles_and_removal_returns_them(backend, wait_until) -> None:
    wait_until(lambda: _free_cpus() == 2.0, timeout=30, what="both CPUs free")
    pg = placement_group([{"CPU": 1}], strategy="STRICT_PACK")
    assert nbdist.get(pg.ready(), timeout=60) == pg
    assert pg.wait(30)
    assert pg.bundle_specs == [{"CPU": 1}] and pg.bundle_count == 1
    row = placement_group_table(pg)
    assert row["state"] == "CREATED" and row["strategy"] == "STRICT_PACK"
    assert pg.id.hex() in placement_group_table()
    wait_until(lambda: _free_cpus() == 1.0, timeout=30, what="one CPU held by the group")
    remove_placement_group(pg)
    wait_until(lambda: _free_cpus() == 2.0, timeout=30, what="the CPU back after removal")
    wait_until(lambda: placement_group_table(pg)["state"] == "REMOVED", timeout=30,
               what="the group shown removed")


def test_an_actor_runs_in_a_bundle_and_dies_with_its_group(backend) -> None:
    pg = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="PACK")
    assert pg.wait(60)
    holder = Holder.options(num_cpus=1, scheduling_strategy=PlacementGroupSchedulingStrategy(
        pg, placement_group_bundle_index=1)).remote()
    assert nbdist.get(holder.group.remote(), timeout=60) == pg.id.hex()
    assert nbdist.get(holder.gpus.remote(), timeout=60) == []
    remove_placement_group(pg)
    with pytest.raises(ActorDiedError):
        for _ in range(100):  # calls until the kill lands
            nbdist.get(holder.group.remote(), timeout=60)


def test_tasks_in_a_group_and_the_older_options(backend) -> None:
    pg = placement_group([{"CPU": 1}])
    assert pg.wait(60)
    try:
        ref = current_group.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
            pg)).remote()
        assert nbdist.get(ref, timeout=60) == pg.id.hex()
        ref = current_group.options(placement_group=pg, placement_group_bundle_index=0).remote()
        assert nbdist.get(ref, timeout=60) == pg.id.hex()
        assert nbdist.get(current_group.remote(), timeout=60) is None
    finally:
        remove_placement_group(pg)


def test_child_tasks_are_captured_only_when_asked(backend) -> None:
    # One CPU in the group, one outside it; the parents ask for none, the children for one.
    pg = placement_group([{"CPU": 1}])
    assert pg.wait(60)
    try:
        captured = parent_and_child.options(
            num_cpus=0, scheduling_strategy=PlacementGroupSchedulingStrategy(
                pg, placement_group_capture_child_tasks=True)).remote()
        assert nbdist.get(captured, timeout=60) == (pg.id.hex(), pg.id.hex())
        free = parent_and_child.options(
            num_cpus=0, scheduling_strategy=PlacementGroupSchedulingStrategy(pg)).remote()
        assert nbdist.get(free, timeout=60) == (pg.id.hex(), None)
    finally:
        remove_placement_group(pg)


def test_work_that_fits_no_bundle_or_a_bad_index_is_refused(backend) -> None:
    pg = placement_group([{"CPU": 1}])
    try:
        with pytest.raises(ValueError, match="cannot fit into any bundles"):
            current_group.options(num_cpus=2, scheduling_strategy=(
                PlacementGroupSchedulingStrategy(pg))).remote()
        with pytest.raises(ValueError, match="bundle index 3 is invalid"):
            current_group.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
                pg, placement_group_bundle_index=3)).remote()
    finally:
        remove_placement_group(pg)


def test_bad_groups_are_refused(backend) -> None:
    with pytest.raises(ValueError):
        placement_group([])
    with pytest.raises(ValueError):
        placement_group([{"CPU": 1}], strategy="SIDEWAYS")
    with pytest.raises(ValueError):
        placement_group([{"CPU": 1}], lifetime="forever")


def test_a_named_detached_group_is_found_by_name(backend) -> None:
    pg = placement_group([{"special": 1}], name="conf-named", lifetime="detached")
    try:
        assert pg.wait(60)
        found = get_placement_group("conf-named")
        assert found.id == pg.id and found.bundle_specs == [{"special": 1}]
        assert nbdist.get(look_up.remote("conf-named"), timeout=60) == pg.id.hex()
        assert nbdist.get(current_group.options(
            num_cpus=0, resources={"special": 1},
            scheduling_strategy=PlacementGroupSchedulingStrategy(found)).remote(),
            timeout=60) == pg.id.hex()
    finally:
        remove_placement_group(pg)
    with pytest.raises(ValueError):
        get_placement_group("no-such-group")


def test_a_group_larger_than_the_cluster_is_never_ready(backend) -> None:
    pg = placement_group([{"CPU": 64}])
    try:
        assert not pg.wait(2)
    finally:
        remove_placement_group(pg)


def test_removal_kills_a_task_running_in_the_group(backend, wait_until) -> None:
    pg = placement_group([{"CPU": 1}])
    assert pg.wait(60)
    ref = sleeper.options(max_retries=0, scheduling_strategy=PlacementGroupSchedulingStrategy(
        pg)).remote(120)
    wait_until(lambda: _free_cpus() == 1.0, timeout=30, what="the group's task to start")
    remove_placement_group(pg)
    with pytest.raises(NbdistError) as info:
        nbdist.get(ref, timeout=60)
    assert not isinstance(info.value, GetTimeoutError)  # it was ended, not left to run
    wait_until(lambda: _free_cpus() == 2.0, timeout=30, what="the CPU back after removal")


def test_scheduling_strategy_values(backend) -> None:
    node = nbdist.get_runtime_context().get_node_id()
    for strategy in ("DEFAULT", "SPREAD", NodeAffinitySchedulingStrategy(node, soft=False),
                     NodeAffinitySchedulingStrategy("ab" * 28, soft=True)):
        assert nbdist.get(current_group.options(scheduling_strategy=strategy).remote(),
                          timeout=60) is None
    holder = Holder.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
        node, soft=False)).remote()
    assert nbdist.get(holder.gpus.remote(), timeout=60) == []
    with pytest.raises(ValueError):
        current_group.options(scheduling_strategy="NEAREST").remote()


def test_gpu_ids_and_accelerator_type_are_accepted(backend) -> None:
    assert nbdist.get_gpu_ids() == []
    f = current_group.options(accelerator_type="A100")
    assert f is not None

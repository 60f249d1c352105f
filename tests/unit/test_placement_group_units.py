"""Placement groups without processes: the head's choice of nodes and its two-phase placement
(`nbdist.daemons.groups`), a node's bundles and the work in them (`nbdist.scheduler.bundles`,
driven through `NodeState` with a recording NodeIO), node pins."""

from __future__ import annotations

from typing import Any

from test_scheduler import RecordingIO, make, run_turn, spec

from nbdist.daemons.groups import GroupTable, assign
from nbdist.driver.strategies import group_shape
from nbdist.exceptions import TaskPlacementGroupRemoved
from nbdist.scheduler import Client, NodeState
from nbdist.wire import protocol as P
from nbdist.wire import serialization
from nbdist.wire.protocol import NODE_PIN, SOFT_NODE_PIN

ONE = {"CPU": 1.0}


# ---------------------------------------------------------------- choosing nodes
def test_assign_follows_each_strategy() -> None:
    free = {1: {"CPU": 2.0}, 2: {"CPU": 2.0}, 3: {"CPU": 2.0}}
    todo = [(0, ONE), (1, ONE)]
    assert len(set(assign(todo, "PACK", free, {}).values())) == 1
    assert len(set(assign(todo, "STRICT_PACK", free, {}).values())) == 1
    assert len(set(assign(todo, "SPREAD", free, {}).values())) == 2
    three = [(i, ONE) for i in range(3)]
    assert sorted(assign(three, "STRICT_SPREAD", free, {}).values()) == [1, 2, 3]
    assert assign([(i, ONE) for i in range(4)], "STRICT_SPREAD", free, {}) is None
    assert assign([(0, {"CPU": 3.0})], "PACK", free, {}) is None
    assert assign([(0, ONE), (1, {"CPU": 2.0})], "STRICT_PACK", free, {}) is None
    # PACK spills over when one node cannot hold it all; SPREAD still uses every node.
    assert len(set(assign([(i, ONE) for i in range(3)], "PACK", free, {}).values())) == 2


def test_assign_places_lost_bundles_away_from_the_others_for_strict_spread() -> None:
    free = {1: {"CPU": 1.0}, 3: {"CPU": 1.0}}
    assert assign([(1, ONE)], "STRICT_SPREAD", free, {0: 1}) == {1: 3}
    assert assign([(1, ONE)], "STRICT_PACK", {1: {"CPU": 1.0}, 3: {"CPU": 1.0}}, {0: 1}) == {1: 1}


class Nodes:
    """The head's side of the nodes: what it sent each, their resources as reported."""

    def __init__(self, **cpus: float) -> None:
        self.info = {int(k[1:]): {"node_id": k, "total": {"CPU": v}, "available": {"CPU": v}}
                     for k, v in cpus.items()}
        self.sent: list[tuple[int, tuple]] = []

    def send(self, node: int, msg: tuple) -> None:
        self.sent.append((node, msg))

    def alive(self) -> dict[int, dict[str, Any]]:
        return self.info

    def take(self) -> list[tuple[int, tuple]]:
        out, self.sent = self.sent, []
        return out


def _table(nodes: Nodes, can_grow: bool = False) -> GroupTable:
    return GroupTable(nodes.send, nodes.alive, can_grow)


def test_one_node_places_a_group_in_one_message() -> None:
    nodes = Nodes(n1=2.0)
    table = _table(nodes)
    row = table.create({"id": "g1", "bundles": [ONE, ONE], "strategy": "PACK"})
    assert row["state"] == "PENDING"
    [(node, msg)] = nodes.take()
    assert node == 1 and msg[:4] == (P.GROUP, "prepare", "g1", 1) and msg[5] is True
    table.prepared("g1", 1, 1, True)
    assert table.table("g1")["state"] == "CREATED" and not nodes.take()
    assert table.table("g1")["bundles_to_node_id"] == {0: "n1", 1: "n1"}


def test_two_phases_commit_only_when_every_node_holds_its_bundles() -> None:
    nodes = Nodes(n1=1.0, n2=1.0)
    table = _table(nodes)
    table.create({"id": "g1", "bundles": [ONE, ONE], "strategy": "STRICT_SPREAD"})
    prepares = nodes.take()
    assert sorted(n for n, _ in prepares) == [1, 2] and all(m[5] is False for _, m in prepares)
    table.prepared("g1", 1, 1, True)
    assert not nodes.take() and table.table("g1")["state"] == "PENDING"
    table.prepared("g1", 1, 2, False)  # node 2's resources were taken meanwhile
    assert nodes.take() == [(1, (P.GROUP, "cancel", "g1", 1))]
    assert table.table("g1")["state"] == "PENDING"
    nodes.info[2]["available"] = {"CPU": 1.0}
    nodes.info[1]["available"] = {"CPU": 1.0}
    table.changed()  # a node reported: try again
    assert sorted(n for n, m in nodes.take() if m[3] == 2) == [1, 2]
    table.prepared("g1", 2, 1, True)
    table.prepared("g1", 2, 2, True)
    assert sorted(nodes.take()) == [(1, (P.GROUP, "commit", "g1", 2)),
                                    (2, (P.GROUP, "commit", "g1", 2))]
    assert table.table("g1")["state"] == "CREATED"


def test_a_lost_node_has_its_bundles_placed_again_elsewhere() -> None:
    nodes = Nodes(n1=1.0, n2=1.0, n3=1.0)
    table = _table(nodes)
    table.create({"id": "g1", "bundles": [ONE, ONE], "strategy": "STRICT_SPREAD"})
    for node, msg in nodes.take():
        table.prepared("g1", msg[3], node, True)
    placed = table.table("g1")["bundles_to_node_id"]
    nodes.take()
    lost = int(placed[0][1:])
    del nodes.info[lost]
    for info in nodes.info.values():
        info["available"] = {"CPU": 0.0 if info["node_id"] == placed[1] else 1.0}
    table.node_lost(lost)
    assert table.table("g1")["state"] == "RESCHEDULING"
    [(node, msg)] = nodes.take()
    assert msg[1] == "prepare" and [i for i, _ in msg[4]] == [0] and msg[5] is True
    assert f"n{node}" not in (placed[0], placed[1])
    table.prepared("g1", msg[3], node, True)
    row = table.table("g1")
    assert row["state"] == "CREATED" and row["bundles_to_node_id"] == {0: f"n{node}",
                                                                       1: placed[1]}


def test_infeasible_groups_end_at_once_unless_nodes_can_join() -> None:
    nodes = Nodes(n1=2.0)
    table = _table(nodes)
    table.create({"id": "g1", "bundles": [{"CPU": 8.0}], "strategy": "PACK"})
    [(node, msg)] = nodes.take()
    assert msg[:3] == (P.GROUP, "remove", "g1") and "can never be placed" in msg[3]
    assert table.table("g1")["state"] == "REMOVED"
    growing = _table(nodes, can_grow=True)
    growing.create({"id": "g2", "bundles": [{"CPU": 8.0}], "strategy": "PACK"})
    assert not nodes.take() and growing.table("g2")["state"] == "PENDING"


def test_names_removal_and_the_driver_leaving() -> None:
    nodes = Nodes(n1=4.0)
    table = _table(nodes)
    table.create({"id": "g1", "bundles": [ONE], "strategy": "PACK", "name": "a", "job": 7})
    table.create({"id": "g2", "bundles": [ONE], "strategy": "PACK", "name": "b", "job": 7,
                  "lifetime": "detached"})
    try:
        table.create({"id": "g3", "bundles": [ONE], "strategy": "PACK", "name": "a"})
        raise AssertionError("a second group took a used name")
    except ValueError as exc:
        assert "already exists" in str(exc)
    assert table.named("a", "")["placement_group_id"] == "g1"
    nodes.take()
    table.job_ended(7)
    assert nodes.take() == [(1, (P.GROUP, "remove", "g1", table.table("g1")["reason"]))]
    assert table.named("a", "") is None and table.named("b", "") is not None


# ---------------------------------------------------------------- a node's bundles
def _group_task(task_id: int, pg: str, index: int = -1, cpus: float = 1.0) -> tuple:
    return spec(task_id, resources=group_shape((("CPU", cpus),), pg, index))


def test_work_in_a_group_waits_for_its_bundles_and_uses_only_them() -> None:
    state, io, driver = make(cpus=2)
    state.submit(driver, _group_task(10, "g1", 0))
    run_turn(state)
    assert not io.execs() and 10 in state.placement.parked  # no bundle here yet
    assert state.group_message((P.GROUP, "prepare", "g1", 1, [(0, ONE)], True)) == (
        "g1", 1, 1, True)
    assert state.placement.avail["CPU"] == 1.0  # reserved for the group
    run_turn(state)
    assert [s[P.S_TASK_ID] for _, s in io.execs()] == [10]
    state.submit(driver, _group_task(20, "g1", 0))  # the bundle is busy: it queues
    run_turn(state)
    assert len(io.execs()) == 1 and state.placement.avail["CPU"] == 1.0


def test_a_prepare_that_does_not_fit_holds_nothing() -> None:
    state, io, driver = make(cpus=2)
    assert state.group_message((P.GROUP, "prepare", "g1", 1, [(0, {"CPU": 3.0})], False))[3] \
        is False
    assert state.placement.avail["CPU"] == 2.0
    state.group_message((P.GROUP, "prepare", "g2", 1, [(0, ONE)], False))
    state.group_message((P.GROUP, "cancel", "g2", 1))
    assert state.placement.avail["CPU"] == 2.0 and "CPU_group_g2" not in state.placement.total


def test_removal_returns_the_resources_and_ends_the_work_in_the_group() -> None:
    state, io, driver = make(cpus=2)
    state.group_message((P.GROUP, "prepare", "g1", 1, [(0, ONE)], True))
    state.submit(driver, _group_task(10, "g1"))
    state.submit(driver, _group_task(20, "g1"))
    run_turn(state)
    [(worker, _)] = io.execs()
    state.group_message((P.GROUP, "remove", "g1", "its placement group g1 was removed"))
    assert io.killed == [worker.pid]
    assert state.placement.avail["CPU"] == 2.0
    assert not [n for n in state.placement.total if "_group_" in n]
    errors = {m[1]: serialization.error_from_blob(m[3][0][1]) for _, m in io.take(P.DONE)}
    assert set(errors) == {10, 20}
    assert all(isinstance(e, TaskPlacementGroupRemoved) for e in errors.values())
    state.submit(driver, _group_task(30, "g1"))  # too late: it fails, it does not wait
    run_turn(state)
    [(_, done)] = io.take(P.DONE)
    assert "was removed" in str(serialization.error_from_blob(done[3][0][1]))


def test_gpu_ids_of_a_bundle_go_to_its_work_and_come_back() -> None:
    io = RecordingIO()
    state = NodeState(io, {"CPU": 2.0, "GPU": 2.0}, [0, 1], 2, 4, 1 << 30)
    io.state = state
    driver = Client(None, P.KIND_DRIVER, 1, 1, 1)
    state.client_joined(driver)
    state.group_message((P.GROUP, "prepare", "g1", 1, [(0, {"GPU": 1.0})], True))
    assert state.placement.free_gpus == [1]
    state.submit(driver, spec(10, resources=group_shape((("GPU", 1.0),), "g1", 0)))
    run_turn(state)
    [(_, msg)] = [(c, m) for c, m in io.sent if m[0] == P.EXEC]
    assert msg[3] == [0]
    state.group_message((P.GROUP, "remove", "g1", "removed"))
    assert sorted(state.placement.free_gpus) == [0, 1]


def test_node_pins_hard_fail_soft_are_dropped_when_the_node_is_not_there() -> None:
    state, io, driver = make(cpus=2)
    state.submit(driver, spec(10, resources=(("CPU", 1.0), ("node:gone", NODE_PIN))))
    state.submit(driver, spec(20, resources=(("CPU", 1.0), ("node:gone", SOFT_NODE_PIN))))
    run_turn(state)
    [(_, done)] = io.take(P.DONE)
    assert done[1] == 10 and "node:gone" in str(serialization.error_from_blob(done[3][0][1]))
    assert [s[P.S_TASK_ID] for _, s in io.execs()] == [20]


def test_a_driver_leaving_tells_the_head_so_its_groups_go() -> None:
    state, io, driver = make(cpus=2)
    state.client_left(driver)
    assert ("group_job_ended", driver.client_no) in io.head


def test_a_removed_group_leaves_no_queue_behind() -> None:
    state, io, driver = make(cpus=2)
    for n in range(3):
        pg = f"g{n}"
        state.group_message((P.GROUP, "prepare", pg, 1, [(0, ONE)], True))
        state.submit(driver, _group_task(10 * (n + 1), pg, cpus=0.0))
        run_turn(state)
        state.group_message((P.GROUP, "remove", pg, "removed"))
    assert not [shape for shape in state.placement.ready if "_group_" in str(shape)]

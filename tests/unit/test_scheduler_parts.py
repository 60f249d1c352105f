"""The scheduler's collaborators driven without sockets: the object table's spilling, task
forwarding to other nodes, a node lost, actor restarts, and the state-change tables."""

from __future__ import annotations

from typing import Any

import pytest
from test_scheduler import actor_spec, finish, make, run_turn, spec

from nbdist import events as ev
from nbdist import exceptions
from nbdist.scheduler import IllegalTransition, NodeState, Worker
from nbdist.scheduler.records import Actor
from nbdist.scheduler.states import ACTOR_MOVES, WORKER_MOVES, ActorState, WorkerState
from nbdist.wire import protocol as P
from nbdist.wire import serialization

KB4 = 4096


def error_of(io: Any, task_id: int) -> BaseException:
    done = {m[1]: m for _, m in io.take(P.DONE)}
    assert done[task_id][2] is False
    return serialization.error_from_blob(done[task_id][3][0][1])


def two_nodes(cpus: int = 1, **other: float) -> tuple[NodeState, Any, Any]:
    """This node (index 1) and node 2, as the head would report it."""
    state, io, driver = make(cpus=cpus)
    res = {"CPU": 4.0, **other}
    state.set_cluster_view({2: {"alive": True, "total": dict(res), "available": dict(res)}})
    return state, io, driver


# ---------------------------------------------------------------- object table: spilling
def test_full_store_spills_least_recently_needed_and_restores_on_read() -> None:
    state, io, driver = make(capacity=3 * KB4)
    objects = state.objects
    for oid in (50, 60, 70):
        assert objects.reserve(driver, oid, KB4) is None
        state.put(driver, oid, None, KB4, ())
    objects.loc(50)  # 50 was needed last: 60 is now the oldest
    assert objects.reserve(driver, 80, KB4) is None
    assert io.on_disk == {60} and objects.spill_count == 1
    assert objects.store_used == 2 * KB4 and objects.spilled_used == KB4
    state.put(driver, 80, None, KB4, ())
    # Reading 60 brings it back, spilling the oldest in memory to make room.
    assert objects.loc(60) == (60, None, KB4)
    assert io.on_disk == {70} and objects.restore_count == 1
    assert objects.store_used == 3 * KB4 and objects.spilled_used == KB4
    assert sorted(objects.spilled_ids(10)) == [70]


def test_freeing_a_spilled_object_removes_its_file() -> None:
    state, io, driver = make(capacity=KB4)
    state.put(driver, 50, None, KB4, ())
    assert state.objects.reserve(driver, 60, KB4) is None
    assert io.on_disk == {50}
    state.refs(driver, [(-1, 50)])
    assert io.on_disk == set() and 50 not in state.objects
    assert state.objects.spilled_used == 0 and io.unlinked == []


def test_no_room_when_the_disk_refuses() -> None:
    state, io, driver = make(capacity=KB4)
    state.put(driver, 50, None, KB4, ())
    io.disk_full = True
    error = state.objects.reserve(driver, 60, KB4)
    assert error is not None and "object store is full" in error
    assert state.objects.reserved_total == 0 and 50 not in io.on_disk


def test_spill_limit_keeps_objects_in_memory() -> None:
    state, io, driver = make(capacity=KB4)
    state.objects.spill_limit = KB4 - 1
    state.put(driver, 50, None, KB4, ())
    assert state.objects.reserve(driver, 60, KB4) is not None
    assert io.on_disk == set()


def test_a_spilled_object_that_cannot_be_read_back_becomes_an_error() -> None:
    state, io, driver = make(capacity=KB4)
    state.put(driver, 50, None, KB4, ())
    assert state.objects.reserve(driver, 60, KB4) is None
    io.disk_lost = True
    state.get_request(driver, [50])
    (_, msg), = io.take(P.OBJ)
    err = serialization.error_from_blob(msg[1][1])
    assert isinstance(err, exceptions.ObjectLostError) and "read back" in str(err)
    assert state.objects.spilled_used == 0


def test_grant_of_a_writer_that_left_is_released() -> None:
    state, _, driver = make(capacity=2 * KB4)
    assert state.objects.reserve(driver, 50, KB4) is None
    assert state.objects.reserved_total == KB4
    state.client_left(driver)
    assert state.objects.reserved_total == 0


# ---------------------------------------------------------------- placement: other nodes
def test_task_this_node_cannot_run_is_forwarded_and_its_result_returns() -> None:
    state, io, driver = two_nodes(GPU=1.0)
    state.put(driver, 50, b"Parg", 0, ())
    state.submit(driver, spec(10, deps=(50,), resources=(("GPU", 1.0),)))
    (index, sent, locs), = io.forwarded
    assert index == 2 and sent[P.S_TASK_ID] == 10 and locs == [(50, b"Parg", 0)]
    assert state.placement.remote[2]["available"]["GPU"] == 0.0  # charged until its report
    state.remote_result(2, 10, True, [(11, b"Pv", 0)], 0.0, 1.0, 4242)
    (_, done), = io.take(P.DONE)
    assert done[1:4] == (10, True, [(11, b"Pv", 0)])
    assert 10 not in state.tasks.by_id and state.objects.loc(11) == (11, b"Pv", 0)


def test_queued_task_spills_back_to_a_node_with_room() -> None:
    state, io, driver = two_nodes(cpus=1)
    state.submit(driver, spec(10))
    state.submit(driver, spec(20))
    run_turn(state)
    assert [s[P.S_TASK_ID] for _, s in io.execs()] == [10]
    assert [(i, s[P.S_TASK_ID]) for i, s, _ in io.forwarded] == [(2, 20)]


def test_task_forwarded_here_is_not_forwarded_again() -> None:
    state, io, _ = two_nodes(cpus=1)
    peer = make_peer(state, 2)
    state.accept_forward(peer, spec(10), [])
    state.accept_forward(peer, spec(20), [])
    run_turn(state)
    assert [s[P.S_TASK_ID] for _, s in io.execs()] == [10] and io.forwarded == []


def make_peer(state: NodeState, index: int) -> Any:
    from nbdist.scheduler import Client

    peer = Client(None, P.KIND_NODE, 900 + index, 0, 0)
    peer.node_index = index
    state.client_joined(peer)
    return peer


def test_infeasible_task_waits_for_a_node_where_nodes_can_join() -> None:
    state, io, driver = make(cpus=1)
    state.placement.infeasible_wait = 5.0
    state.submit(driver, spec(10, resources=(("GPU", 1.0),)))
    assert io.take(P.DONE) == [] and 10 in state.placement.parked
    res = {"CPU": 1.0, "GPU": 1.0}
    state.set_cluster_view({2: {"alive": True, "total": dict(res), "available": dict(res)}})
    assert [i for i, _, _ in io.forwarded] == [2] and not state.placement.parked


def test_parked_task_fails_when_its_wait_ends() -> None:
    state, io, driver = make(cpus=1)
    state.placement.infeasible_wait = 5.0
    state.submit(driver, spec(10, resources=(("GPU", 1.0),)))
    deadline = state.placement.parked[10]
    state.expire_parked(deadline - 1.0)
    assert io.take(P.DONE) == []
    state.expire_parked(deadline)
    assert isinstance(error_of(io, 10), ValueError)


# ---------------------------------------------------------------- a node lost
def test_node_lost_runs_its_tasks_again_here() -> None:
    state, io, driver = two_nodes(cpus=1)
    state.submit(driver, spec(10))
    state.submit(driver, spec(20, retries=1))
    run_turn(state)
    assert [s[P.S_TASK_ID] for _, s, _ in io.forwarded] == [20]
    state.node_lost(2)
    finish(state, io, 10)
    run_turn(state)
    assert [s[P.S_TASK_ID] for _, s in io.execs()] == [10, 20]
    assert state.tasks.by_id[20].retries_left == 0


def test_node_lost_fails_a_task_without_retries() -> None:
    state, io, driver = two_nodes(cpus=1)
    state.submit(driver, spec(10))
    state.submit(driver, spec(20, name="g"))
    run_turn(state)
    state.node_lost(2)
    err = error_of(io, 20)
    assert isinstance(err, exceptions.WorkerCrashedError) and "'g' was lost" in str(err)


def test_node_lost_fails_what_was_fetched_from_it() -> None:
    state, io, driver = two_nodes()
    foreign = (2 << P.OWNER_SHIFT) | 5
    state.refs(driver, [(1, foreign)])
    assert (2, (P.NODE_REFS, [(1, foreign)])) in io.node_msgs  # borrowed while held
    state.submit(driver, spec(10, deps=(foreign,)))
    assert (2, (P.FETCH, [foreign])) in io.node_msgs
    state.node_lost(2)
    err = error_of(io, 10)
    assert isinstance(err, exceptions.ObjectLostError)
    assert state.objects.borrowed == {} and state.objects.fetching == set()


def test_result_from_a_lost_node_is_dropped() -> None:
    state, io, driver = two_nodes(cpus=1)
    state.submit(driver, spec(10))
    state.submit(driver, spec(20, retries=1))
    run_turn(state)
    state.node_lost(2)
    state.remote_result(2, 20, True, [(21, None, KB4)], 0.0, 1.0, 1)
    assert io.unlinked == [21] and 20 in state.tasks.by_id


# ---------------------------------------------------------------- actors
def test_actor_restart_reruns_the_call_in_flight_when_retries_allow() -> None:
    state, io, driver = make()
    extra = {"max_restarts": 1, "max_task_retries": 1}
    state.submit(driver, actor_spec(500, 10, P.ACTOR_INIT, extra))
    run_turn(state)
    worker = io.execs()[0][0]
    actor = state.actors.by_id[500]
    state.result(worker, 10, True, [(11, b"PN", 0)], None, 0.0, 1.0)
    assert actor.state == "alive"
    state.submit(driver, actor_spec(500, 20, "m"))
    state.worker_lost(worker, -9)
    assert actor.state == "restarting" and worker.state == "dead"
    assert state.placement.avail["CPU"] == 2.0  # nothing held while no process runs it
    run_turn(state)
    assert actor.state == "pending"
    new_worker = io.execs()[-1][0]
    assert [s[P.S_TASK_ID] for w, s in io.execs() if w is new_worker] == [10, 20]
    assert [m[1] for _, m in io.take(P.DONE)] == [10]  # the call did not fail
    restarted = [ev.build(item) for _, m in io.sent if m[0] == P.EVENT for item in m[1]
                 if ev.kind_of(item) == "actor_restarted"]
    assert [(e.actor_id, e.restarts) for e in restarted] == [(f"{500:018x}", 1)]


def test_killed_actor_does_not_restart() -> None:
    state, io, driver = make()
    state.submit(driver, actor_spec(500, 10, P.ACTOR_INIT, {"max_restarts": 5}))
    run_turn(state)
    worker = io.execs()[0][0]
    state.kill_actor(500, no_restart=True)
    assert io.killed == [worker.pid]
    state.worker_lost(worker, -9)
    run_turn(state)
    assert len(io.execs()) == 1 and state.actors.by_id[500].state == "dead"
    state.submit(driver, actor_spec(500, 20, "m"))
    err = error_of(io, 20)
    assert isinstance(err, exceptions.ActorDiedError) and "kill()" in str(err)


def test_actor_on_a_lost_node_restarts_here() -> None:
    state, io, driver = two_nodes(cpus=1, GPU=1.0)
    state.placement.total["GPU"] = 1.0  # this node gains one too: the restart may land here
    state.placement.avail["GPU"] = 0.0
    init = actor_spec(500, 10, P.ACTOR_INIT, {"max_restarts": 1})
    init = (*init[:P.S_RESOURCES], (("GPU", 1.0),), *init[P.S_RESOURCES + 1:])
    state.submit(driver, init)
    run_turn(state)
    assert [i for i, _, _ in io.forwarded] == [2]
    actor = state.actors.by_id[500]
    assert actor.remote == 2 and actor.state == "pending"
    state.placement.avail["GPU"] = 1.0
    state.node_lost(2)
    assert actor.state == "restarting" and actor.remote == 0
    run_turn(state)
    assert actor.state == "pending" and [s[P.S_TASK_ID] for _, s in io.execs()] == [10]


# ---------------------------------------------------------------- state changes
def test_worker_state_changes_follow_the_table() -> None:
    w = Worker(7)
    w.to("busy")
    w.to("idle")
    w.to("dead")
    with pytest.raises(IllegalTransition, match="dead -> busy"):
        w.to("busy")
    assert w.state == "dead"


def test_actor_state_changes_follow_the_table() -> None:
    actor = Actor(actor_spec(500, 10, P.ACTOR_INIT), 1)
    with pytest.raises(IllegalTransition):
        actor.to("pending")  # a pending actor is not started again
    actor.to("alive")
    with pytest.raises(IllegalTransition):
        actor.to("alive")
    actor.to("dead")
    for state in ACTOR_MOVES:
        with pytest.raises(IllegalTransition):
            actor.to(state)  # type: ignore[arg-type]
    stand_in = Actor.stand_in(600, 2)
    with pytest.raises(IllegalTransition):
        stand_in.to("alive")


def test_tables_cover_every_state() -> None:
    assert set(WORKER_MOVES) == set(WorkerState.__args__)  # type: ignore[attr-defined]
    assert set(ACTOR_MOVES) == set(ActorState.__args__)  # type: ignore[attr-defined]
    for moves in (WORKER_MOVES, ACTOR_MOVES):
        assert all(set(nexts) <= set(moves) for nexts in moves.values())


def test_a_dead_worker_is_not_given_work() -> None:
    state, io, driver = make(cpus=1)
    run_turn(state)
    state.submit(driver, spec(10))
    run_turn(state)
    worker = io.execs()[0][0]
    state.worker_lost(worker, 0)
    with pytest.raises(IllegalTransition):
        worker.to("idle")
    state.worker_lost(worker, 0)  # a second report of the same loss changes nothing
    assert worker.pid not in state.workers.workers


def test_owners_hear_which_node_ran_a_forwarded_task() -> None:
    state, io, driver = two_nodes(GPU=1.0)
    state.set_cluster_view({2: {"alive": True, "total": {"CPU": 4.0, "GPU": 1.0},
                                "available": {"CPU": 4.0, "GPU": 1.0}, "pid": 0x1234}})
    state.submit(driver, spec(10, resources=(("GPU", 1.0),)))
    assert [s[P.S_TASK_ID] for _, s, _ in io.forwarded] == [10]
    state.remote_started(2, [(10, 777)], 5.0)
    (_, started), = io.take(P.STARTED)
    assert started[1] == [(10, 777, "000200001234")]
    state.remote_result(2, 10, True, [(11, b"Pv", 0)], 0.0, 1.0, 777)
    (_, done), = io.take(P.DONE)
    assert done[6:] == (777, "000200001234")

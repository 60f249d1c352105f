"""The scheduler without sockets: where an object is without fetching it (``LOCATE`` /
``PRESENT``, Ray's ``wait(fetch_local=False)``), and generator values lost with their node
rebuilt by running their task again here (`nbdist.scheduler.lineage`)."""

from __future__ import annotations

from typing import Any

from test_scheduler import finish, run_turn, spec
from test_scheduler_parts import two_nodes

from nbdist import exceptions
from nbdist.scheduler import NodeState
from nbdist.scheduler.records import READY, Client
from nbdist.wire import protocol as P
from nbdist.wire import serialization

ON_2 = 2 << P.OWNER_SHIFT  # ids made on node 2


def told(io: Any, client: Client) -> list[int]:
    """The ids ``client`` was told exist (those messages taken)."""
    return [oid for m in _take(io, P.PRESENT, client) for oid in m[1]]


def values(io: Any, client: Client) -> dict[int, tuple]:
    """The values sent to ``client`` (those messages taken)."""
    return {m[1][0]: m[1] for m in _take(io, P.OBJ, client)}


def _take(io: Any, op: int, client: Client) -> list[tuple]:
    out = [m for c, m in io.sent if m[0] == op and c is client]
    io.sent = [(c, m) for c, m in io.sent if not (m[0] == op and c is client)]
    return out


# ---------------------------------------------------------------- locate
def test_a_located_object_is_told_once_it_exists_here_or_on_its_owner_node() -> None:
    state, io, driver = two_nodes()
    other = Client(None, P.KIND_DRIVER, 3, 3, 3)
    state.put(driver, 50, b"Pv", 0, ())
    state.objects.locate(driver, [50])
    assert told(io, driver) == [50] and values(io, driver) == {}  # nothing sent but that

    foreign = ON_2 | 5
    state.refs(driver, [(1, foreign)])
    state.objects.locate(driver, [foreign])
    state.objects.locate(other, [foreign])
    # One question to the owner node however many ask; nothing fetched.
    assert [m for i, m in io.node_msgs if m[0] in (P.LOCATE, P.FETCH)] == [
        (P.LOCATE, [foreign])]
    state.objects.present_elsewhere([foreign])
    assert told(io, driver) == [foreign] and told(io, other) == [foreign]
    assert state.objects.by_id[foreign].state != READY and not state.objects.fetching


def test_a_located_object_of_this_node_is_told_when_stored_and_a_gone_one_as_a_get() -> None:
    state, io, driver = two_nodes()
    state.submit(driver, spec(10))
    state.objects.locate(driver, [11])
    assert told(io, driver) == []
    run_turn(state)
    finish(state, io, 10)
    assert told(io, driver) == [11]
    state.objects.locate(driver, [77])  # ours, unknown: gone
    err = serialization.error_from_blob(values(io, driver)[77][1])
    assert isinstance(err, exceptions.ObjectLostError)


def test_an_object_located_on_a_node_that_is_lost_fails() -> None:
    state, io, driver = two_nodes()
    foreign = ON_2 | 5
    state.refs(driver, [(1, foreign)])
    state.objects.locate(driver, [foreign])
    state.node_lost(2)
    assert told(io, driver) == [foreign]  # ready: its get raises that it is lost
    assert state.objects.by_id[foreign].error


# ---------------------------------------------------------------- lineage
def generator_spec(task_id: int, retries: int = 3) -> tuple:
    """A dynamic generator task, as the driver submits it (`backends.local`)."""
    return (*spec(task_id)[:P.S_EXTRA], {"generator": retries})


def ran_on_node_2(state: NodeState, io: Any, driver: Client, retries: int = 3,
                  items: tuple[int, ...] = (ON_2 | 1, ON_2 | 2, ON_2 | 3)) -> None:
    """Task 20, a generator, spills to node 2 (task 10 holds this node's one CPU) and ends
    there with the refs of ``items``, values kept in node 2's store."""
    state.submit(driver, spec(10))
    state.submit(driver, generator_spec(20, retries))
    run_turn(state)
    assert [s[P.S_TASK_ID] for _, s, _ in io.forwarded] == [20]
    state.remote_result(2, 20, True, [(21, b"Pend", 0, items)], 0.0, 1.0, 4242)
    finish(state, io, 10)
    run_turn(state)
    io.take(P.DONE)


def rebuild_exec(io: Any) -> tuple[Any, tuple]:
    (worker, sent), = [(w, s) for w, s in io.execs() if (s[P.S_EXTRA] or {}).get("rebuild")]
    return worker, sent


def test_values_lost_with_their_node_are_made_again_by_the_task_run_here() -> None:
    state, io, driver = two_nodes(cpus=1)
    a, b, c = ON_2 | 1, ON_2 | 2, ON_2 | 3
    ran_on_node_2(state, io, driver)
    state.value_arrived((a, b"Pa", 0))  # fetched here before the loss: kept
    state.get_request(driver, [b])
    assert (2, (P.FETCH, [b])) in io.node_msgs
    io.take(P.OBJ)

    state.node_lost(2)
    assert values(io, driver) == {}  # b waits for the rebuild, it does not fail
    run_turn(state)
    worker, sent = rebuild_exec(io)
    assert sent[P.S_EXTRA]["rebuild"] == [None, b, c]  # by index; a is here already
    assert sent[P.S_NRET] == 0 and sent[P.S_MAX_RETRIES] == 0 and sent[P.S_FID] == 7
    assert worker.client is not None
    state.put(worker.client, b, b"Pb", 0, ())
    state.put(worker.client, c, b"Pc", 0, ())
    assert values(io, driver)[b] == (b, b"Pb", 0)
    state.result(worker, sent[P.S_TASK_ID], True, [], None, 0.0, 1.0)
    assert not state.lineage.rebuilding
    assert state.objects.loc(a) == (a, b"Pa", 0) and state.objects.loc(c) == (c, b"Pc", 0)


def test_a_rerun_that_fails_or_yields_fewer_values_fails_the_ones_it_did_not_make() -> None:
    for error in (serialization.error_blob("g", ValueError("boom"), 1, "1",
                                              lambda filename: False), None):
        state, io, driver = two_nodes(cpus=1)
        a, b = ON_2 | 1, ON_2 | 2
        ran_on_node_2(state, io, driver, items=(a, b))
        state.get_request(driver, [a, b])
        io.take(P.OBJ)
        state.node_lost(2)
        run_turn(state)
        worker, sent = rebuild_exec(io)
        assert worker.client is not None
        state.put(worker.client, a, b"Pa", 0, ())
        state.result(worker, sent[P.S_TASK_ID], error is None, [], error, 0.0, 1.0)
        got = values(io, driver)
        assert got[a] == (a, b"Pa", 0)
        err = serialization.error_from_blob(got[b][1])
        assert isinstance(err, ValueError) and isinstance(err, exceptions.TaskError)
        assert ("fewer values" if error is None else "boom") in str(err)


def test_a_task_without_retries_is_not_run_again_and_its_arguments_are_let_go() -> None:
    state, io, driver = two_nodes(cpus=1)
    a = ON_2 | 1
    ran_on_node_2(state, io, driver, retries=0, items=(a,))
    assert not state.lineage.records
    state.get_request(driver, [a])
    state.node_lost(2)
    run_turn(state)
    assert not [s for _, s in io.execs() if (s[P.S_EXTRA] or {}).get("rebuild")]
    err = serialization.error_from_blob(values(io, driver)[a][1])
    assert isinstance(err, exceptions.ObjectLostError)


def test_a_record_pins_the_arguments_and_goes_with_its_values() -> None:
    state, io, driver = two_nodes(cpus=1)
    state.put(driver, 50, b"Parg", 0, ())
    state.submit(driver, spec(10))
    state.submit(driver, (*spec(20, deps=(50,))[:P.S_EXTRA], {"generator": 1}))
    run_turn(state)
    a = ON_2 | 1
    state.remote_result(2, 20, True, [(21, b"Pend", 0, (a,))], 0.0, 1.0, 4242)
    state.refs(driver, [(-1, 50)])
    assert 50 in state.objects  # the record keeps the argument to run the task again
    state.refs(driver, [(-1, 21)])  # the generator's return, and so its value, go
    assert a not in state.objects
    assert not state.lineage.records and not state.lineage.by_item and 50 not in state.objects


def test_a_record_goes_at_once_when_nobody_holds_the_generators_return() -> None:
    state, io, driver = two_nodes(cpus=1)
    state.put(driver, 50, b"Parg", 0, ())
    state.submit(driver, spec(10))
    state.submit(driver, (*spec(20, deps=(50,))[:P.S_EXTRA], {"generator": 1}))
    run_turn(state)
    state.refs(driver, [(-1, 21), (-1, 50)])  # the driver let go of the return before its end
    a = ON_2 | 1
    state.remote_result(2, 20, True, [(21, b"Pend", 0, (a,))], 0.0, 1.0, 4242)
    assert not state.lineage.records and not state.lineage.by_item and 50 not in state.objects


def test_a_rerun_this_node_cannot_run_goes_to_another_node_which_sends_the_values_back() -> None:
    state, io, driver = two_nodes(cpus=1, beta=1.0)
    beta = (("CPU", 1.0), ("beta", 1.0))
    a, b = ON_2 | 1, ON_2 | 2
    state.submit(driver, (*spec(20, resources=beta)[:P.S_EXTRA], {"generator": 3}))
    assert [(i, s[P.S_TASK_ID]) for i, s, _ in io.forwarded] == [(2, 20)]
    state.remote_result(2, 20, True, [(21, b"Pend", 0, (a, b))], 0.0, 1.0, 4242)
    res = {"CPU": 1.0, "beta": 1.0}
    state.set_cluster_view({2: {"alive": True, "total": dict(res), "available": dict(res)},
                            3: {"alive": True, "total": dict(res), "available": dict(res)}})
    state.get_request(driver, [b])
    io.take(P.OBJ)
    state.node_lost(2)
    (index, sent, _), = io.forwarded[1:]
    assert index == 3 and sent[P.S_EXTRA]["rebuild"] == [a, b]
    state.value_arrived((a, b"Pa", 0))  # node 3 sends the values ahead of the task's end
    state.value_arrived((b, b"Pb", 0))
    state.remote_result(3, sent[P.S_TASK_ID], True, [], 0.0, 1.0, 4343)
    assert values(io, driver) == {b: (b, b"Pb", 0)}
    assert state.objects.loc(a) == (a, b"Pa", 0) and not state.lineage.rebuilding


def test_the_node_running_a_rerun_for_another_sends_it_the_values_before_the_end() -> None:
    state, io, _ = two_nodes(cpus=1)
    peer = Client(None, P.KIND_NODE, 3 << 20, 0, 0)
    peer.node_index = 3
    a, b = ON_2 | 1, ON_2 | 2
    rerun = (*spec(3 << 60 | 9)[:P.S_NRET], 0, *spec(0)[P.S_NRET + 1:P.S_EXTRA],
             {"generator": 3, "rebuild": [a, b]})
    state.accept_forward(peer, rerun, [])
    run_turn(state)
    (worker, _), = io.execs()
    assert worker.client is not None
    state.put(worker.client, a, b"Pa", 0, ())
    state.put(worker.client, b, b"Pb", 0, ())
    state.result(worker, rerun[P.S_TASK_ID], True, [], None, 0.0, 1.0)
    to_peer = [m for c, m in io.sent if c is peer and m[0] in (P.OBJ, P.DONE)]
    assert [(m[0], m[1][0] if m[0] == P.OBJ else m[1]) for m in to_peer] == [
        (P.OBJ, a), (P.OBJ, b), (P.DONE, rerun[P.S_TASK_ID])]

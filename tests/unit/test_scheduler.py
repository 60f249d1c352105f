"""The node's scheduler as a state machine: messages in, sends and process actions out."""

from __future__ import annotations

from typing import Any

import pytest

from nbdist import events as ev
from nbdist import exceptions
from nbdist.ids import CLIENT_SHIFT, client_no
from nbdist.scheduler import Client, NodeState, Worker
from nbdist.wire import protocol as P
from nbdist.wire import serialization


class RecordingIO:
    """NodeIO that records what the scheduler asks for; workers are plain records, other nodes
    a list of messages, the disk a set of spilled ids."""

    node_id = "n1"
    node_pid = 99

    def __init__(self) -> None:
        self.sent: list[tuple[Client, tuple]] = []
        self.killed: list[int] = []
        self.interrupted: list[int] = []
        self.unlinked: list[int] = []
        self.head: list[tuple[str, Any]] = []
        self.next_pid = 1000
        self.forwarded: list[tuple[int, tuple, list]] = []
        self.node_msgs: list[tuple[int, tuple]] = []
        self.on_disk: set[int] = set()
        self.disk_full = False
        self.disk_lost = False
        self.state: NodeState | None = None

    def send(self, client: Client, msg: tuple) -> None:
        self.sent.append((client, msg))

    def spawn_worker(self, actor: bool = False) -> Worker:
        self.next_pid += 1
        worker = Worker(self.next_pid)
        worker.client = Client(None, P.KIND_WORKER, self.next_pid, self.next_pid, 0)
        worker.client.worker = worker
        assert self.state is not None
        self.state.worker_started(worker)
        return worker

    def kill_worker(self, worker: Worker, graceful: bool = False) -> None:
        self.killed.append(worker.pid)

    def unlink(self, oid: int) -> None:
        self.unlinked.append(oid)

    def interrupt_worker(self, worker: Worker) -> None:
        self.interrupted.append(worker.pid)

    def to_head(self, op: str, args: Any) -> None:
        self.head.append((op, args))

    def resources_changed(self) -> None:
        pass

    def forward(self, index: int, spec: tuple, dep_locs: list) -> None:
        self.forwarded.append((index, spec, dep_locs))

    def to_node(self, index: int, msg: tuple) -> None:
        self.node_msgs.append((index, msg))

    def spill(self, oid: int, size: int) -> str | None:
        if self.disk_full:
            return None
        self.on_disk.add(oid)
        return f"/spill/{oid:x}"

    def restore(self, oid: int, path: str) -> bool:
        self.on_disk.discard(oid)
        return not self.disk_lost

    def remove_spill(self, path: str) -> None:
        self.on_disk.discard(int(path.rsplit("/", 1)[1], 16))

    def execs(self) -> list[tuple[Worker, tuple]]:
        return [(c.worker, m[1]) for c, m in self.sent if m[0] == P.EXEC and c.worker]

    def take(self, op: int) -> list[tuple[Client, tuple]]:
        out = [(c, m) for c, m in self.sent if m[0] == op]
        self.sent = [(c, m) for c, m in self.sent if m[0] != op]
        return out


def make(cpus: int = 2, capacity: int = 1 << 30, **res: float
         ) -> tuple[NodeState, RecordingIO, Client]:
    io = RecordingIO()
    state = NodeState(io, {"CPU": float(cpus), **res}, [], cpus, 4, capacity)
    io.state = state
    driver = Client(None, P.KIND_DRIVER, 1, 1, 1)
    state.client_joined(driver)
    return state, io, driver


def spec(task_id: int, deps: tuple[int, ...] = (), resources: Any = None, retries: int = 0,
         name: str = "f") -> tuple:
    return (task_id, 7, name, b"", deps, 1, resources, retries, False, 0, None, 0, (), 1, None)


def run_turn(state: NodeState) -> None:
    if state.need_dispatch:
        state.dispatch()
    state.flush_notices()


def finish(state: NodeState, io: RecordingIO, task_id: int, value: bytes = b"Pv") -> None:
    worker = next(w for w, s in io.execs() if s[P.S_TASK_ID] == task_id)
    state.result(worker, task_id, True, [(task_id + 1, value, 0)], None, 0.0, 1.0)


def test_dependent_task_waits_for_its_argument() -> None:
    state, io, driver = make()
    state.submit(driver, spec(10))
    state.submit(driver, spec(20, deps=(11,)))
    run_turn(state)
    assert [s[P.S_TASK_ID] for _, s in io.execs()] == [10]
    finish(state, io, 10)
    run_turn(state)
    assert [s[P.S_TASK_ID] for _, s in io.execs()] == [10, 20]
    # The dependency's value travels with the EXEC.
    _, msg = [x for x in io.sent if x[1][0] == P.EXEC][-1]
    assert msg[2] == [(11, b"Pv", 0)]


def test_cpu_limit_queues_tasks() -> None:
    state, io, driver = make(cpus=2)
    for i in range(5):
        state.submit(driver, spec(10 * (i + 1)))
    run_turn(state)
    assert len(io.execs()) == 2
    finish(state, io, 10)
    run_turn(state)
    assert len(io.execs()) == 3


def test_custom_resource_serialises_tasks() -> None:
    state, io, driver = make(cpus=4, special=1.0)
    shape = (("CPU", 1.0), ("special", 1.0))
    state.submit(driver, spec(10, resources=shape))
    state.submit(driver, spec(20, resources=shape))
    run_turn(state)
    assert [s[P.S_TASK_ID] for _, s in io.execs()] == [10]


def test_infeasible_task_fails_with_clear_error() -> None:
    state, io, driver = make(cpus=2)
    state.submit(driver, spec(10, resources=(("GPU", 1.0),)))
    done = io.take(P.DONE)
    assert len(done) == 1 and done[0][1][2] is False
    err = serialization.error_from_blob(done[0][1][3][0][1])
    assert isinstance(err, ValueError) and "GPU" in str(err)


def test_an_error_travelling_down_a_chain_whose_middle_ref_was_dropped() -> None:
    # f(g(h())) with h failing, the driver holding only h's and f's refs: storing g's error
    # fails f, whose end drops the last reference to g's result while it is being stored.
    state, io, driver = make()
    state.submit(driver, spec(10))
    state.submit(driver, spec(20, deps=(11,)))
    state.submit(driver, spec(30, deps=(21,)))
    state.refs(driver, [(-1, 21)])
    run_turn(state)
    worker = io.execs()[0][0]
    blob = serialization.system_error_blob(ValueError("boom"))
    state.result(worker, 10, False, [], blob, 0.0, 1.0)
    done = {m[1]: m[2] for _, m in io.take(P.DONE)}
    assert done == {10: False, 20: False, 30: False}
    assert 21 not in state.objects and 31 in state.objects and 11 in state.objects


def test_failed_dependency_fails_dependents_without_running() -> None:
    state, io, driver = make()
    state.submit(driver, spec(10))
    state.submit(driver, spec(20, deps=(11,)))
    run_turn(state)
    worker = io.execs()[0][0]
    blob = serialization.system_error_blob(exceptions.TaskCancelledError("x"))
    state.result(worker, 10, False, [], blob, 0.0, 1.0)
    run_turn(state)
    assert [s[P.S_TASK_ID] for _, s in io.execs()] == [10]
    done = {m[1]: m for _, m in io.take(P.DONE)}
    assert done[20][2] is False and done[20][3][0][1] == blob


def test_object_freed_when_last_holder_releases() -> None:
    state, io, driver = make()
    state.put(driver, 50, None, 4096, ())
    assert state.objects.store_used == 4096
    state.refs(driver, [(-1, 50)])
    assert 50 not in state.objects and io.unlinked == [50]
    assert state.objects.store_used == 0


def test_contained_refs_live_as_long_as_their_container() -> None:
    state, io, driver = make()
    state.put(driver, 50, b"Pinner", 0, ())
    state.put(driver, 60, b"Pouter", 0, (50,))
    state.refs(driver, [(-1, 50)])
    assert 50 in state.objects
    state.refs(driver, [(-1, 60)])
    assert 50 not in state.objects and 60 not in state.objects


def test_argument_pinned_until_task_ends() -> None:
    state, io, driver = make()
    state.put(driver, 50, b"Parg", 0, ())
    state.submit(driver, spec(10, deps=(50,)))
    state.refs(driver, [(-1, 50)])
    assert 50 in state.objects
    run_turn(state)
    finish(state, io, 10)
    assert 50 not in state.objects


def test_worker_death_retries_then_fails() -> None:
    state, io, driver = make(cpus=1)
    state.submit(driver, spec(10, retries=1))
    run_turn(state)
    w1 = io.execs()[0][0]
    state.worker_lost(w1, -9)
    run_turn(state)
    assert len(io.execs()) == 2
    w2 = io.execs()[1][0]
    assert w2 is not w1
    state.worker_lost(w2, -9)
    done = io.take(P.DONE)
    err = serialization.error_from_blob(done[0][1][3][0][1])
    assert isinstance(err, exceptions.WorkerCrashedError)
    assert "SIGKILL" in str(err)
    assert state.placement.avail["CPU"] == 1.0


def test_blocked_worker_lends_its_cpu() -> None:
    state, io, driver = make(cpus=1)
    state.submit(driver, spec(10))
    state.submit(driver, spec(20))
    run_turn(state)
    assert len(io.execs()) == 1
    state.blocked(io.execs()[0][0])
    run_turn(state)
    assert len(io.execs()) == 2
    state.unblocked(io.execs()[0][0])
    assert state.placement.avail["CPU"] == -1.0


def test_cancel_queued_task_never_runs() -> None:
    state, io, driver = make(cpus=1)
    state.submit(driver, spec(10))
    state.submit(driver, spec(20))
    state.cancel(21, force=False)
    run_turn(state)
    finish(state, io, 10)
    run_turn(state)
    assert [s[P.S_TASK_ID] for _, s in io.execs()] == [10]
    done = {m[1]: m for _, m in io.take(P.DONE)}
    assert isinstance(serialization.error_from_blob(done[20][3][0][1]),
                      exceptions.TaskCancelledError)


def actor_spec(actor_id: int, task_id: int, method: str, extra: Any = None) -> tuple:
    return (task_id, 5 if method == P.ACTOR_INIT else 0, "A." + method, b"", (), 1, None, 0,
            False, actor_id, method, 0, (), 1, extra)


def test_actor_calls_dispatch_in_order_and_actor_restarts() -> None:
    state, io, driver = make()
    state.submit(driver, actor_spec(500, 10, P.ACTOR_INIT, {"max_restarts": 1}))
    run_turn(state)
    for tid in (20, 30, 40):
        state.submit(driver, actor_spec(500, tid, "m"))
    sent = [s[P.S_TASK_ID] for _, s in io.execs()]
    assert sent == [10, 20, 30, 40]
    worker = io.execs()[0][0]
    state.result(worker, 10, True, [(11, b"PN", 0)], None, 0.0, 1.0)
    state.worker_lost(worker, -9)
    run_turn(state)
    done = {m[1]: m for _, m in io.take(P.DONE)}
    assert isinstance(serialization.error_from_blob(done[20][3][0][1]),
                      exceptions.ActorDiedError)
    # The constructor runs again on a new worker.
    assert [s[P.S_TASK_ID] for _, s in io.execs()][-1] == 10
    new_worker = io.execs()[-1][0]
    assert new_worker is not worker
    state.worker_lost(new_worker, -9)
    state.submit(driver, actor_spec(500, 60, "m"))
    done = {m[1]: m for _, m in io.take(P.DONE)}
    assert isinstance(serialization.error_from_blob(done[60][3][0][1]),
                      exceptions.ActorDiedError)


def test_actor_retires_when_last_handle_goes() -> None:
    state, io, driver = make()
    state.submit(driver, actor_spec(500, 10, P.ACTOR_INIT, {}))
    run_turn(state)
    worker = io.execs()[0][0]
    state.result(worker, 10, True, [(11, b"PN", 0)], None, 0.0, 1.0)
    state.refs(driver, [(-1, 500)])
    assert worker.pid in io.killed or any(m[0] == P.EXIT for _, m in io.sent)


@pytest.mark.parametrize("policy,expect_retry", [(True, True), (("KeyError",), False)])
def test_retry_exceptions_policy(policy: Any, expect_retry: bool) -> None:
    state, io, driver = make(cpus=1)
    s = list(spec(10, retries=2))
    s[P.S_RETRY_EXC] = policy
    state.submit(driver, tuple(s))
    run_turn(state)
    worker = io.execs()[0][0]
    try:
        raise ValueError("flaky")
    except ValueError as exc:
        blob = serialization.error_blob("f", exc, 1, "t", lambda name: False)
    state.result(worker, 10, False, [], blob, 0.0, 1.0)
    run_turn(state)
    assert (len(io.execs()) == 2) is expect_retry


def _child(task_id: int, parent: int) -> tuple:
    return (task_id, 7, "child", b"", (), 1, None, 0, False, 0, None, parent, (), 1, None)


def _running_parent_with_child(cpus: int = 3) -> tuple[NodeState, RecordingIO, Worker, Worker]:
    state, io, driver = make(cpus=cpus)
    state.submit(driver, spec(10))
    run_turn(state)
    parent_worker = io.execs()[0][0]
    assert parent_worker.client is not None
    state.submit(parent_worker.client, _child(20, parent=10))
    run_turn(state)
    child_worker = next(w for w, s in io.execs() if s[P.S_TASK_ID] == 20)
    return state, io, parent_worker, child_worker


def _cancelled(io: RecordingIO, task_id: int) -> bool:
    done = {m[1]: m for _, m in io.sent if m[0] == P.DONE}
    return task_id in done and isinstance(
        serialization.error_from_blob(done[task_id][3][0][1]), exceptions.TaskCancelledError)


def test_a_recursive_cancel_reaches_the_tasks_the_task_submitted() -> None:
    state, io, parent_worker, child_worker = _running_parent_with_child()
    state.cancel(11, force=False)  # recursive: the default
    assert sorted(io.interrupted) == sorted([parent_worker.pid, child_worker.pid])
    # One it submits before its interrupt lands is cancelled as it arrives.
    assert parent_worker.client is not None
    state.submit(parent_worker.client, _child(30, parent=10))
    assert _cancelled(io, 30)


def test_a_non_recursive_cancel_leaves_the_submitted_tasks_alone() -> None:
    state, io, parent_worker, child_worker = _running_parent_with_child()
    state.cancel(11, force=False, recursive=False)
    assert io.interrupted == [parent_worker.pid]
    assert parent_worker.client is not None
    state.submit(parent_worker.client, _child(30, parent=10))
    assert not _cancelled(io, 30)


def test_a_cancel_of_a_ref_made_on_another_node_goes_to_that_node() -> None:
    state, io, _driver = make()
    foreign = (client_no(3, 5) << CLIENT_SHIFT) | 7  # a task there owns it
    state.cancel(foreign, force=False)
    assert io.node_msgs == [(3, (P.CANCEL, foreign, False, True))]
    io.node_msgs.clear()
    state.cancel((client_no(1, 5) << CLIENT_SHIFT) | 7, force=True)  # one of ours, ended
    assert io.node_msgs == []


def test_the_driver_hears_that_a_task_its_task_submitted_started() -> None:
    state, io, parent_worker, child_worker = _running_parent_with_child()
    state.flush_notices()
    started = [rec for _, m in io.sent if m[0] == P.EVENT for rec in m[1]
               if rec[0] == ev.TaskStarted.code]
    assert [(r[1][1], r[1][4]) for r in started] == [(20, child_worker.pid)]


def test_a_forced_recursive_cancel_kills_the_children_workers_too() -> None:
    state, io, parent_worker, child_worker = _running_parent_with_child()
    state.cancel(11, force=True)
    assert sorted(io.killed) == sorted([parent_worker.pid, child_worker.pid])

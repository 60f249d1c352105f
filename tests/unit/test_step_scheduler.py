"""Step-through mode in the node's scheduler (`nbdist.scheduler.stepping`), without sockets:
what is held, what a step releases, and that holding changes nothing else."""

from __future__ import annotations

from nbdist import events as ev
from nbdist.scheduler import NodeState
from nbdist.wire import protocol as P
from tests.unit.test_scheduler import RecordingIO, actor_spec, finish, make, run_turn, spec


def execs(io: RecordingIO) -> list[int]:
    return [s[P.S_TASK_ID] for _, s in io.execs()]


def records(io: RecordingIO, cls: type[ev.Event]) -> list[ev.Event]:
    return [ev.build(item) for _, m in io.sent if m[0] == P.EVENT for item in m[1]
            if item[0] == cls.code]


def step_on(state: NodeState, driver: object) -> None:
    state.step(driver, True, 0)  # type: ignore[arg-type]


def test_a_ready_task_is_held_until_a_step_releases_it() -> None:
    state, io, driver = make()
    step_on(state, driver)
    state.submit(driver, spec(10))
    run_turn(state)
    assert execs(io) == []
    assert [e.task_id for e in records(io, ev.TaskHeld)] == [f"{10:018x}"]  # type: ignore[attr-defined]
    reply, released = state.step(driver, None, 1)
    run_turn(state)
    assert execs(io) == [10]
    assert reply == {"on": True, "held": 0, "released": [(10, "f")]}
    assert [t.id for t in released] == [10]


def test_only_the_ready_set_is_held_and_a_level_step_releases_exactly_it() -> None:
    state, io, driver = make(cpus=4)
    step_on(state, driver)
    # A tree of adds: 4 leaves, 2 sums of them, 1 root.
    for tid in (10, 20, 30, 40):
        state.submit(driver, spec(tid))
    state.submit(driver, spec(50, deps=(11, 21)))
    state.submit(driver, spec(60, deps=(31, 41)))
    state.submit(driver, spec(70, deps=(51, 61)))
    run_turn(state)
    assert state.stepper.held[1] and [t.id for t in state.stepper.held[1]] == [10, 20, 30, 40]
    reply, _ = state.step(driver, None, "level")
    run_turn(state)
    assert execs(io) == [10, 20, 30, 40] and reply["held"] == 0
    for tid in (10, 20, 30, 40):
        finish(state, io, tid)
    run_turn(state)
    assert execs(io) == [10, 20, 30, 40]  # the next level is held, not run
    assert [t.id for t in state.stepper.held[1]] == [50, 60]
    state.step(driver, None, "level")
    run_turn(state)
    assert execs(io)[4:] == [50, 60]


def test_a_step_of_n_releases_the_n_held_longest() -> None:
    state, io, driver = make(cpus=4)
    step_on(state, driver)
    for tid in (10, 20, 30):
        state.submit(driver, spec(tid))
    reply, _ = state.step(driver, None, 2)
    run_turn(state)
    assert execs(io) == [10, 20] and reply["held"] == 1


def test_a_dependency_is_kept_while_held() -> None:
    state, io, driver = make()
    step_on(state, driver)
    state.submit(driver, spec(10))
    state.submit(driver, spec(20, deps=(11,)))
    state.step(driver, None, 5)  # only 10 is ready: 20 is not held, it waits for 11
    run_turn(state)
    assert execs(io) == [10]
    finish(state, io, 10)
    run_turn(state)
    assert execs(io) == [10]
    state.step(driver, None, 1)
    run_turn(state)
    assert execs(io) == [10, 20]


def test_actor_calls_keep_their_order_when_released_out_of_it() -> None:
    state, io, driver = make()
    state.submit(driver, actor_spec(500, 10, P.ACTOR_INIT, {}))
    run_turn(state)
    step_on(state, driver)
    for tid in (20, 30, 40):
        state.submit(driver, actor_spec(500, tid, "m"))
    assert execs(io) == [10]  # the constructor is not held; the calls are
    # Release the second call alone: it must not overtake the first.
    held = state.stepper.held[1]
    first = held.popleft()
    state.step(driver, None, 1)
    assert execs(io) == [10]
    held.appendleft(first)
    state.step(driver, None, 1)
    assert execs(io) == [10, 20, 30]


def test_run_releases_everything_and_ends_the_mode() -> None:
    state, io, driver = make(cpus=4)
    step_on(state, driver)
    for tid in (10, 20, 30):
        state.submit(driver, spec(tid))
    reply, _ = state.step(driver, False, 0)
    run_turn(state)
    assert execs(io) == [10, 20, 30] and reply["on"] is False and reply["held"] == 0
    state.submit(driver, spec(40))
    run_turn(state)
    assert execs(io)[-1] == 40
    modes = records(io, ev.StepMode)
    assert [(e.on, e.held, len(e.released)) for e in modes] == [  # type: ignore[attr-defined]
        (True, 0, 0), (False, 0, 3)]


def test_a_cancelled_held_task_ends_and_is_not_released() -> None:
    state, io, driver = make()
    step_on(state, driver)
    state.submit(driver, spec(10))
    state.cancel(11, False)
    reply, _ = state.step(driver, None, 1)
    run_turn(state)
    assert execs(io) == [] and reply["released"] == []
    assert [m[2] for _, m in io.take(P.DONE)] == [False]


def test_the_mode_holds_only_its_own_drivers_tasks() -> None:
    state, io, driver = make()
    step_on(state, driver)
    from nbdist.scheduler import Client

    other = Client(None, P.KIND_DRIVER, 2, 2, 2)
    state.client_joined(other)
    theirs = (30, 7, "g", b"", (), 1, None, 0, False, 0, None, 0, (), 2, None)
    state.submit(other, theirs)
    state.submit(driver, spec(10))
    run_turn(state)
    assert execs(io) == [30]


def test_a_driver_leaving_releases_its_held_tasks() -> None:
    state, io, driver = make()
    step_on(state, driver)
    state.submit(driver, spec(10))
    state.client_left(driver)
    run_turn(state)
    assert not state.stepper.jobs and not state.stepper.held


def test_calls_to_nbdists_own_actors_are_never_held() -> None:
    state, io, driver = make()
    state.submit(driver, actor_spec(500, 10, P.ACTOR_INIT, {"namespace": "_nbdist_metrics"}))
    state.submit(driver, actor_spec(600, 20, P.ACTOR_INIT, {"namespace": "lesson"}))
    run_turn(state)
    step_on(state, driver)
    state.submit(driver, actor_spec(500, 30, "m"))
    state.submit(driver, actor_spec(600, 40, "m"))
    run_turn(state)
    assert execs(io) == [10, 20, 30]  # the lesson's call is held, the aggregator's is not
    assert [t.id for t in state.stepper.held[1]] == [40]

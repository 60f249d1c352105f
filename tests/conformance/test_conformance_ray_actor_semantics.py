"""Actors, asyncio and futures as Ray 2.60 has them, on both backends:

- ``ref.future()`` (a concurrent.futures.Future) and ``ref.as_future()`` (an asyncio future)
  give the value, or raise the task's error as its own type and as TaskError (RayTaskError);
  so do ``await ref`` and ``get`` for an exception raised in an ``async def`` actor method;
- ``@remote`` on an ``async def`` function is refused with Ray's ValueError;
- a call with arguments that do not fit the signature (function, constructor, method) fails
  at ``.remote()`` with TypeError, as Ray binds them at submission;
- ``nbdist.actor.exit_actor()`` in a plain, threaded or async actor: that call and every later
  one raise ActorDiedError, and the actor is not restarted (an intended exit);
- concurrency groups: calls of a group that block (``time.sleep``, even in an ``async def``)
  hold up no other group nor the default group, and the other way round; an async actor's
  group runs its sync and async methods on one thread of its own;
- an async or threaded actor runs a call whose arguments are ready before an earlier call
  whose arguments are not; a plain actor runs one caller's calls in submission order.

Blocked calls end by a call of another group that releases them, never by a timer.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from polling import poll

import nbdist
import nbdist.actor
from nbdist.exceptions import ActorDiedError, RayActorError, RayTaskError

pytestmark = pytest.mark.timeout(180)

GET_S = 60.0


@nbdist.remote
def fails_with_key_error(key):
    raise KeyError(key)


@nbdist.remote
def add(a, b=1):
    return a + b


@nbdist.remote
class Gate:
    """An async actor whose ``wait`` ends once ``open`` was called: a ref ready on demand."""

    def __init__(self):
        self.event = asyncio.Event()

    async def wait(self, value):
        await self.event.wait()
        return value

    async def open(self):
        self.event.set()


# ------------------------------------------------------------------ futures and asyncio


def test_future_gives_the_value_or_the_tasks_own_error(backend) -> None:
    assert add.remote(1, 2).future().result(timeout=GET_S) == 3
    fut = fails_with_key_error.remote("k").future()
    with pytest.raises(KeyError):
        fut.result(timeout=GET_S)
    assert isinstance(fut.exception(), RayTaskError)


def test_as_future_is_an_asyncio_future_of_the_value_or_error(backend) -> None:
    async def main():
        fut = add.remote(2).as_future()
        assert isinstance(fut, asyncio.Future)
        value = await asyncio.wait_for(fut, GET_S)
        try:
            await asyncio.wait_for(fails_with_key_error.remote("k").as_future(), GET_S)
        except KeyError as exc:
            return value, exc
        return value, None

    value, error = asyncio.run(main())
    assert value == 3
    assert isinstance(error, RayTaskError)


@nbdist.remote
class AsyncFailer:
    async def fail(self, key):
        await asyncio.sleep(0)
        raise KeyError(key)

    async def ok(self):
        return "ok"


def test_an_async_methods_exception_reaches_await_and_get(backend) -> None:
    actor = AsyncFailer.remote()

    async def main():
        try:
            await actor.fail.remote("a")
        except KeyError as exc:
            return exc
        return None

    error = asyncio.run(main())
    assert isinstance(error, RayTaskError) and "a" in str(error)
    with pytest.raises(KeyError) as info:
        nbdist.get(actor.fail.remote("b"), timeout=GET_S)
    assert isinstance(info.value, RayTaskError)
    assert nbdist.get(actor.ok.remote(), timeout=GET_S) == "ok"  # the actor lives on


def test_remote_refuses_an_async_function_as_ray_does(backend) -> None:
    async def coroutine_function():
        return 1

    with pytest.raises(ValueError, match="'async def' should not be used for remote tasks"):
        nbdist.remote(coroutine_function)
    with pytest.raises(ValueError, match="asyncio.run"):
        nbdist.remote(num_cpus=1)(coroutine_function)


# ------------------------------------------------------------------ arguments checked at submission


@nbdist.remote
class Adder:
    def __init__(self, start, *, step=1):
        self.total = start
        self.step = step

    def add(self, x, y=0):
        self.total += x + y
        return self.total

    @staticmethod
    def twice(x):
        return 2 * x

    @classmethod
    def name(cls):
        return cls.__name__


def test_wrong_arguments_fail_at_remote_with_type_error(backend) -> None:
    with pytest.raises(TypeError, match="missing a required argument: 'a'"):
        add.remote()
    with pytest.raises(TypeError, match="too many positional arguments"):
        add.remote(1, 2, 3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'c'"):
        add.options(num_cpus=0.5).remote(1, c=3)
    with pytest.raises(TypeError, match="missing a required argument: 'start'"):
        Adder.remote()
    with pytest.raises(TypeError, match="too many positional arguments"):
        Adder.remote(1, 2)
    actor = Adder.remote(10, step=2)
    with pytest.raises(TypeError, match="missing a required argument: 'x'"):
        actor.add.remote()
    with pytest.raises(TypeError, match="too many positional arguments"):
        actor.add.options(name="adding").remote(1, 2, 3)
    with pytest.raises(TypeError):
        actor.twice.remote()
    with pytest.raises(TypeError):
        actor.name.remote(1)
    # Nothing of the refused calls ran; calls that fit do.
    assert nbdist.get(actor.add.remote(1, y=2), timeout=GET_S) == 13
    assert nbdist.get([actor.twice.remote(4), actor.name.remote()], timeout=GET_S) == [8, "Adder"]
    assert nbdist.get(add.remote(a=1, b=5), timeout=GET_S) == 6


# ------------------------------------------------------------------ exit_actor


@nbdist.remote
class Quitter:
    def ping(self):
        return "pong"

    def quit(self):
        nbdist.actor.exit_actor()
        return "still here"


@nbdist.remote(max_concurrency=3)
class ThreadedQuitter:
    def ping(self):
        return "pong"

    def quit(self):
        nbdist.actor.exit_actor()
        return "still here"


@nbdist.remote
class AsyncQuitter:
    async def ping(self):
        return "pong"

    async def quit(self):
        nbdist.actor.exit_actor()
        return "still here"


@pytest.mark.parametrize("cls", [Quitter, ThreadedQuitter, AsyncQuitter],
                         ids=["plain", "threaded", "async"])
def test_exit_actor_ends_the_actor_for_good(backend, cls) -> None:
    actor = cls.options(max_restarts=2, max_task_retries=2).remote()
    assert nbdist.get(actor.ping.remote(), timeout=GET_S) == "pong"
    with pytest.raises(ActorDiedError, match="INTENDED_USER_EXIT"):
        nbdist.get(actor.quit.remote(), timeout=GET_S)
    # Not restarted, although restarts were left: every later call fails, and says why.
    for _ in range(2):
        with pytest.raises(RayActorError) as later:
            nbdist.get(actor.ping.remote(), timeout=GET_S)
        if backend == "nbdist":
            assert "INTENDED_USER_EXIT" in str(later.value)


def test_exit_actor_outside_an_actor_is_a_type_error(backend) -> None:
    with pytest.raises(TypeError):
        nbdist.actor.exit_actor()

    @nbdist.remote
    def in_a_task():
        try:
            nbdist.actor.exit_actor()
        except TypeError:
            return "TypeError"
        return "no error"

    assert nbdist.get(in_a_task.remote(), timeout=GET_S) == "TypeError"


# ------------------------------------------------------------------ concurrency groups


@nbdist.remote(concurrency_groups={"g1": 1, "g2": 1})
class AsyncGroups:
    def __init__(self):
        self.released = False
        self.started = 0

    @nbdist.method(concurrency_group="g1")
    async def block(self):
        self.started += 1
        while not self.released:
            time.sleep(0.01)  # blocks g1's thread: no await
        return "unblocked"

    async def block_default(self):
        self.started += 1
        while not self.released:
            time.sleep(0.01)
        return "unblocked"

    @nbdist.method(concurrency_group="g2")
    def started_count(self):
        return self.started

    @nbdist.method(concurrency_group="g2")
    def release(self):
        self.released = True

    @nbdist.method(concurrency_group="g2")
    async def ok(self):
        return "ok"

    async def default_ok(self):
        return "default ok"


def test_a_blocked_group_of_an_async_actor_holds_up_no_other(backend) -> None:
    actor = AsyncGroups.remote()
    blocked = [actor.block.remote(), actor.block.remote()]  # g1 runs one at a time
    poll(lambda: nbdist.get(actor.started_count.remote(), timeout=GET_S) >= 1, timeout=GET_S,
         what="g1's first call to start")
    assert nbdist.get(actor.ok.remote(), timeout=GET_S) == "ok"
    assert nbdist.get(actor.default_ok.remote(), timeout=GET_S) == "default ok"
    assert nbdist.get(actor.started_count.remote(), timeout=GET_S) == 1  # g1's limit
    nbdist.get(actor.release.remote(), timeout=GET_S)
    assert nbdist.get(blocked, timeout=GET_S) == ["unblocked", "unblocked"]


def test_a_blocked_default_group_of_an_async_actor_holds_up_no_other(backend) -> None:
    actor = AsyncGroups.remote()
    blocked = actor.block_default.remote()
    poll(lambda: nbdist.get(actor.started_count.remote(), timeout=GET_S) == 1, timeout=GET_S,
         what="the default group's call to start")
    assert nbdist.get(actor.ok.remote(), timeout=GET_S) == "ok"
    # A method's group can be chosen per call: ok in g1, which nothing blocks.
    assert nbdist.get(actor.ok.options(concurrency_group="g1").remote(), timeout=GET_S) == "ok"
    nbdist.get(actor.release.remote(), timeout=GET_S)
    assert nbdist.get(blocked, timeout=GET_S) == "unblocked"


@nbdist.remote(concurrency_groups={"io": 2, "compute": 4})
class GroupThreads:
    def __init__(self):
        self.loop = asyncio.get_event_loop()

    @nbdist.method(concurrency_group="io")
    async def io_async(self):
        return threading.get_ident(), id(asyncio.get_running_loop())

    @nbdist.method(concurrency_group="io")
    def io_sync(self):
        return threading.get_ident(), id(asyncio.get_event_loop())

    @nbdist.method(concurrency_group="compute")
    def compute(self):
        return threading.get_ident(), id(asyncio.get_event_loop())

    def default_sync(self):
        return threading.get_ident(), asyncio.get_event_loop() is self.loop


def test_each_group_of_an_async_actor_has_its_own_thread_and_loop(backend) -> None:
    actor = GroupThreads.remote()
    io_async, io_sync, compute, default = nbdist.get(
        [actor.io_async.remote(), actor.io_sync.remote(), actor.compute.remote(),
         actor.default_sync.remote()], timeout=GET_S)
    assert io_async == io_sync  # same thread, same loop
    assert compute[0] != io_sync[0] and compute[1] != io_sync[1]
    assert default[0] not in (io_sync[0], compute[0])
    assert default[1], "the default group's loop is the constructor's get_event_loop()"
    moved = nbdist.get(actor.io_sync.options(concurrency_group="compute").remote(),
                       timeout=GET_S)
    assert moved == compute


@nbdist.remote(concurrency_groups={"ctl": 1})
class ThreadedGroups:
    def __init__(self):
        self.released = False
        self.running = 0
        self.peak = 0
        self.lock = threading.Lock()

    def hold(self):
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        while not self.released:
            time.sleep(0.01)
        with self.lock:
            self.running -= 1
        return "done"

    @nbdist.method(concurrency_group="ctl")
    def state(self):
        return self.running, self.peak

    @nbdist.method(concurrency_group="ctl")
    def release(self):
        self.released = True


def test_a_threaded_actors_groups_and_its_default_group_of_one(backend) -> None:
    actor = ThreadedGroups.remote()
    held = [actor.hold.remote() for _ in range(3)]
    poll(lambda: nbdist.get(actor.state.remote(), timeout=GET_S)[0] == 1, timeout=GET_S,
         what="the first call to start")
    nbdist.get(actor.release.remote(), timeout=GET_S)  # ctl runs although default is busy
    assert nbdist.get(held, timeout=GET_S) == ["done"] * 3
    # With groups and no max_concurrency, the default group runs one call at a time.
    assert nbdist.get(actor.state.remote(), timeout=GET_S) == (0, 1)


@nbdist.remote
class AsyncCrowd:
    def __init__(self):
        self.event = asyncio.Event()
        self.running = 0

    async def join(self):
        self.running += 1
        await self.event.wait()
        return "joined"

    async def count(self):
        return self.running

    async def release(self):
        self.event.set()


def test_an_async_actor_runs_many_calls_at_once_by_default(backend) -> None:
    actor = AsyncCrowd.remote()
    joined = [actor.join.remote() for _ in range(20)]
    poll(lambda: nbdist.get(actor.count.remote(), timeout=GET_S) == 20, timeout=GET_S,
         what="twenty calls running at once")
    nbdist.get(actor.release.remote(), timeout=GET_S)
    assert nbdist.get(joined, timeout=GET_S) == ["joined"] * 20


@nbdist.remote(max_concurrency=2, concurrency_groups={"ctl": 1})
class AsyncLimited:
    def __init__(self):
        self.event = asyncio.Event()
        self.running = 0
        self.peak = 0

    async def join(self):
        self.loop = asyncio.get_running_loop()
        self.running += 1
        self.peak = max(self.peak, self.running)
        await self.event.wait()
        self.running -= 1
        return "joined"

    @nbdist.method(concurrency_group="ctl")
    def state(self):
        return self.running, self.peak

    @nbdist.method(concurrency_group="ctl")
    def release(self):  # runs on ctl's thread: the event is set on the default group's loop
        self.loop.call_soon_threadsafe(self.event.set)


def test_max_concurrency_limits_an_async_actors_default_group(backend) -> None:
    actor = AsyncLimited.remote()
    joined = [actor.join.remote() for _ in range(4)]
    poll(lambda: nbdist.get(actor.state.remote(), timeout=GET_S)[0] == 2, timeout=GET_S,
         what="two calls running")
    ready, _ = nbdist.wait(joined, timeout=0.5)
    assert not ready and nbdist.get(actor.state.remote(), timeout=GET_S) == (2, 2)
    nbdist.get(actor.release.remote(), timeout=GET_S)
    assert nbdist.get(joined, timeout=GET_S) == ["joined"] * 4
    assert nbdist.get(actor.state.remote(), timeout=GET_S) == (0, 2)


# ------------------------------------------------------------------ order of calls


@nbdist.remote
class Counter:
    def __init__(self):
        self.value = 0

    def add(self, x):
        self.value += x
        return self.value


@nbdist.remote
class AsyncCounter:
    def __init__(self):
        self.value = 0

    async def add(self, x):
        self.value += x
        return self.value


@nbdist.remote(max_concurrency=2)
class ThreadedCounter:
    def __init__(self):
        self.value = 0
        self.lock = threading.Lock()

    def add(self, x):
        with self.lock:
            self.value += x
            return self.value


@pytest.mark.parametrize("cls", [AsyncCounter, ThreadedCounter], ids=["async", "threaded"])
def test_a_concurrent_actor_runs_a_ready_call_before_one_waiting_for_arguments(
        backend, cls) -> None:
    counter = cls.remote()
    assert nbdist.get(counter.add.remote(0), timeout=GET_S) == 0
    gate = Gate.remote()
    first = counter.add.remote(gate.wait.remote(1))
    second = counter.add.remote(2)
    assert nbdist.get(second, timeout=GET_S) == 2  # while the first still waits
    nbdist.get(gate.open.remote(), timeout=GET_S)
    assert nbdist.get(first, timeout=GET_S) == 3


def test_a_plain_actor_runs_one_callers_calls_in_submission_order(backend) -> None:
    counter = Counter.remote()
    assert nbdist.get(counter.add.remote(0), timeout=GET_S) == 0
    gate = Gate.remote()
    first = counter.add.remote(gate.wait.remote(1))
    second = counter.add.remote(2)
    ready, _ = nbdist.wait([second], timeout=0.5)
    assert not ready
    nbdist.get(gate.open.remote(), timeout=GET_S)
    assert nbdist.get([first, second], timeout=GET_S) == [1, 3]


@pytest.mark.parametrize("cls", [AsyncCounter, ThreadedCounter], ids=["async", "threaded"])
def test_a_new_concurrent_actors_first_calls_run_when_their_arguments_are(backend, cls) -> None:
    # No call has reached the actor yet: these go through the node's queue, not straight to it.
    gate = Gate.remote()
    counter = cls.remote()
    first = counter.add.remote(gate.wait.remote(1))
    second = counter.add.remote(2)
    assert nbdist.get(second, timeout=GET_S) == 2  # while the first still waits
    nbdist.get(gate.open.remote(), timeout=GET_S)
    assert nbdist.get(first, timeout=GET_S) == 3

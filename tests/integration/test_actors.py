"""Actors: ordering, handles passed around, async and threaded concurrency, named and detached
actors, kill, and methods with several returns.

Concurrency is shown by timestamps or thread ids the actor records itself, never by how long
the test took.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import uuid

import pytest

import nbdist

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("cluster")]


@nbdist.remote
class Recorder:
    def __init__(self) -> None:
        self.seen: list = []

    def append(self, item) -> int:
        self.seen.append(item)
        return len(self.seen)

    def items(self) -> list:
        return self.seen


@nbdist.remote
class Counter:
    def __init__(self, start: int = 0) -> None:
        self.value = start

    def increment(self, by: int = 1) -> int:
        self.value += by
        return self.value

    def read(self) -> int:
        return self.value


def test_calls_from_one_caller_run_in_submission_order() -> None:
    recorder = Recorder.remote()
    refs = [recorder.append.remote(i) for i in range(200)]
    assert nbdist.get(refs) == list(range(1, 201))
    assert nbdist.get(recorder.items.remote()) == list(range(200))


def test_constructor_arguments_and_state() -> None:
    counter = Counter.remote(10)
    counter.increment.remote(5)
    assert nbdist.get(counter.increment.remote()) == 16
    assert nbdist.get(counter.read.remote()) == 16


@nbdist.remote
def bump_from_task(counter: nbdist.ActorHandle, times: int) -> int:
    return nbdist.get([counter.increment.remote() for _ in range(times)])[-1]


def test_handle_passed_to_tasks() -> None:
    counter = Counter.remote()
    nbdist.get([bump_from_task.remote(counter, 5) for _ in range(4)])
    assert nbdist.get(counter.read.remote()) == 20


@nbdist.remote
class Forwarder:
    def __init__(self, target: nbdist.ActorHandle) -> None:
        self.target = target

    def forward(self, by: int) -> int:
        return nbdist.get(self.target.increment.remote(by))


def test_handle_passed_to_another_actor() -> None:
    counter = Counter.remote()
    forwarder = Forwarder.remote(counter)
    assert nbdist.get(forwarder.forward.remote(3)) == 3
    assert nbdist.get(forwarder.forward.remote(4)) == 7
    assert nbdist.get(counter.read.remote()) == 7


def test_handle_passed_to_a_method() -> None:
    counter = Counter.remote()
    recorder = Recorder.remote()
    nbdist.get(recorder.append.remote(counter))
    (stored,) = nbdist.get(recorder.items.remote())
    assert nbdist.get(stored.increment.remote(2)) == 2
    assert nbdist.get(counter.read.remote()) == 2


@nbdist.remote
class AsyncWorker:
    async def work(self, seconds: float) -> tuple[float, float]:
        start = time.monotonic()
        await asyncio.sleep(seconds)
        return start, time.monotonic()


def test_async_methods_run_concurrently() -> None:
    worker = AsyncWorker.remote()
    spans = nbdist.get([worker.work.remote(0.5) for _ in range(4)])
    latest_start = max(start for start, _ in spans)
    earliest_end = min(end for _, end in spans)
    assert latest_start < earliest_end, f"async calls did not overlap: {spans}"


@nbdist.remote(max_concurrency=4)
class ThreadedWorker:
    def __init__(self) -> None:
        self.barrier = threading.Barrier(4)

    def meet(self) -> tuple[int, float, float]:
        start = time.monotonic()
        # Four calls can only pass the barrier together, i.e. if they run in 4 threads at once.
        self.barrier.wait(timeout=20)
        return threading.get_ident(), start, time.monotonic()


def test_max_concurrency_runs_calls_in_threads() -> None:
    worker = ThreadedWorker.remote()
    results = nbdist.get([worker.meet.remote() for _ in range(4)])
    assert len({thread for thread, _, _ in results}) == 4
    assert max(start for _, start, _ in results) < min(end for _, _, end in results)


@nbdist.remote
class SerialWorker:
    def __init__(self) -> None:
        self.running = 0
        self.most = 0
        self.lock = threading.Lock()

    def busy(self, seconds: float) -> None:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(seconds)
        with self.lock:
            self.running -= 1

    def most_at_once(self) -> int:
        return self.most


def test_default_actor_runs_one_call_at_a_time() -> None:
    worker = SerialWorker.remote()
    nbdist.get([worker.busy.remote(0.05) for _ in range(6)])
    assert nbdist.get(worker.most_at_once.remote()) == 1


def test_named_actor_is_found_by_name() -> None:
    name = f"counter-{uuid.uuid4().hex}"
    counter = Counter.options(name=name).remote()
    nbdist.get(counter.increment.remote(3))
    found = nbdist.get_actor(name)
    assert isinstance(found, nbdist.ActorHandle)
    assert nbdist.get(found.increment.remote()) == 4
    assert nbdist.get(counter.read.remote()) == 4


def test_get_actor_of_unknown_name_raises_value_error() -> None:
    with pytest.raises(ValueError):
        nbdist.get_actor(f"nope-{uuid.uuid4().hex}")


def test_named_actor_name_is_unique() -> None:
    name = f"unique-{uuid.uuid4().hex}"
    first = Counter.options(name=name).remote()
    nbdist.get(first.read.remote())
    with pytest.raises(ValueError):
        second = Counter.options(name=name).remote()
        nbdist.get(second.read.remote())


def _gone(name: str) -> bool:
    try:
        nbdist.get_actor(name)
    except ValueError:
        return True
    return False


def test_named_actor_dies_with_its_last_handle(wait_until) -> None:
    name = f"scoped-{uuid.uuid4().hex}"
    counter = Counter.options(name=name).remote()
    nbdist.get(counter.increment.remote())
    del counter
    gc.collect()
    wait_until(lambda: _gone(name), timeout=30, what=f"non-detached actor {name} to go away")


def test_an_actor_goes_with_its_last_handle_without_the_cycle_collector(wait_until) -> None:
    # A handle must not sit in a reference cycle: the actor ends when the last handle is
    # dropped, not whenever Python's cycle collector happens to run.
    name = f"plain-{uuid.uuid4().hex}"
    gc.disable()
    try:
        counter = Counter.options(name=name).remote()
        method = counter.increment
        assert nbdist.get(method.remote()) == 1
        del counter
        assert nbdist.get(method.remote()) == 2  # a method object keeps its handle
        del method
        wait_until(lambda: _gone(name), timeout=30, what=f"actor {name} to go away")
    finally:
        gc.enable()


def test_detached_actor_outlives_its_handle_until_killed(wait_until) -> None:
    name = f"detached-{uuid.uuid4().hex}"
    counter = Counter.options(name=name, lifetime="detached").remote()
    nbdist.get(counter.increment.remote(5))
    del counter
    gc.collect()

    # Proves the handle's release was processed: a scoped actor released at the same time dies.
    scoped_name = f"scoped-{uuid.uuid4().hex}"
    scoped = Counter.options(name=scoped_name).remote()
    nbdist.get(scoped.read.remote())
    del scoped
    gc.collect()
    wait_until(lambda: _gone(scoped_name), timeout=30, what="the scoped actor to go away")

    found = nbdist.get_actor(name)
    assert nbdist.get(found.increment.remote()) == 6
    nbdist.kill(found)
    wait_until(lambda: _gone(name), timeout=30, what="the killed detached actor to go away")


def test_killed_actor_raises_actor_died_error() -> None:
    counter = Counter.remote()
    assert nbdist.get(counter.increment.remote()) == 1
    nbdist.kill(counter)
    with pytest.raises(nbdist.exceptions.ActorDiedError):
        nbdist.get(counter.increment.remote(), timeout=30)


@nbdist.remote
class Splitter:
    @nbdist.method(num_returns=2)
    def split(self, text: str) -> tuple[str, str]:
        head, _, tail = text.partition(" ")
        return head, tail


def test_method_with_num_returns() -> None:
    splitter = Splitter.remote()
    head, tail = splitter.split.remote("hello big world")
    assert nbdist.get(tail) == "big world"
    assert nbdist.get(head) == "hello"
    first, second = splitter.split.options(num_returns=2).remote("a b")
    assert nbdist.get([first, second]) == ["a", "b"]


def test_actor_class_options_num_cpus_still_works() -> None:
    counter = Counter.options(num_cpus=1).remote(1)
    assert nbdist.get(counter.increment.remote()) == 2

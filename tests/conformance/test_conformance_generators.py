"""Generator tasks and methods, on both backends: ``num_returns="streaming"`` (the default for
a generator function), ``"dynamic"``, iteration (sync and async), ``wait`` on a generator,
``completed``/``is_finished``, backpressure, errors raised at their item, cancel."""

from __future__ import annotations

import asyncio
import threading

import pytest
from polling import poll

import nbdist
from nbdist.exceptions import TaskCancelledError

pytestmark = pytest.mark.timeout(180)


@nbdist.remote
def count(n, fail_at=-1):
    for i in range(n):
        if i == fail_at:
            raise KeyError(f"no item {i}")
        yield i * 10


@nbdist.remote
class Tally:
    """Where a generator under test reports how far it got."""

    def __init__(self):
        self.n = 0

    def add(self):
        self.n += 1

    def get(self):
        return self.n


@nbdist.remote(_generator_backpressure_num_objects=1)
def paced(n, tally):
    for i in range(n):
        nbdist.get(tally.add.remote())
        yield i


@nbdist.remote
def gated(gate, tally=None):
    yield "first"
    if tally is not None:
        nbdist.get(tally.add.remote())
    nbdist.get(gate.wait.remote())
    yield "second"


@nbdist.remote(max_concurrency=2)
class Gate:
    def __init__(self):
        self.event = threading.Event()

    def open(self):
        self.event.set()

    def wait(self):
        return self.event.wait(60)


@nbdist.remote(max_concurrency=2)
class Producer:
    def items(self, n):
        for i in range(n):
            yield f"item {i}"

    @nbdist.method(num_returns="dynamic")
    def all_at_once(self, n):
        yield from range(n)


@nbdist.remote
class AsyncProducer:
    async def items(self, n):
        for i in range(n):
            await asyncio.sleep(0)
            yield i + 100


@nbdist.remote(num_returns="dynamic")
def dynamic(n):
    for i in range(n):
        yield i * i


def test_a_generator_function_streams_its_values(backend) -> None:
    gen = count.remote(4)
    assert type(gen).__name__ == "ObjectRefGenerator"
    assert isinstance(gen, nbdist.ObjectRefGenerator)
    assert [nbdist.get(ref) for ref in gen] == [0, 10, 20, 30]
    assert gen.is_finished()


def test_items_arrive_before_the_task_ends(backend) -> None:
    gate = Gate.remote()
    gen = gated.remote(gate)
    assert nbdist.get(next(gen)) == "first"
    assert not nbdist.wait([gen.completed()], timeout=0)[0]
    gate.open.remote()
    assert nbdist.get(next(gen)) == "second"
    with pytest.raises(StopIteration):
        next(gen)
    nbdist.get(gen.completed())


def test_the_error_is_raised_at_the_item_where_the_generator_raised(backend) -> None:
    refs = list(count.remote(5, 2))
    assert len(refs) == 3
    assert nbdist.get(refs[:2]) == [0, 10]
    with pytest.raises(KeyError, match="no item 2") as info:
        nbdist.get(refs[2])
    assert "_drive_sync" not in str(info.value)  # no engine frames in the traceback


def test_wait_on_a_generator_is_ready_when_its_next_item_is(backend) -> None:
    gate = Gate.remote()
    gen = gated.remote(gate)
    ready, rest = nbdist.wait([gen], timeout=60)
    assert ready == [gen] and rest == []
    assert nbdist.get(next(gen)) == "first"
    ready, rest = nbdist.wait([gen], timeout=0.2)
    assert ready == [] and rest == [gen]
    gate.open.remote()
    ready, _ = nbdist.wait([gen], timeout=60)
    assert ready == [gen]
    assert nbdist.get(next(gen)) == "second"


def test_async_for_over_a_generator(backend) -> None:
    async def collect():
        return [nbdist.get(ref) async for ref in count.remote(3)]

    assert asyncio.run(collect()) == [0, 10, 20]


def test_backpressure_pauses_the_generator_until_items_are_taken(backend) -> None:
    tally = Tally.remote()
    gen = paced.remote(4, tally)
    poll(lambda: nbdist.get(tally.get.remote()) >= 1, timeout=60)
    # Nothing taken: the generator may not run ahead of its one-item allowance.
    assert not nbdist.wait([gen.completed()], timeout=1.0)[0]
    assert nbdist.get(tally.get.remote()) <= 2
    assert [nbdist.get(ref) for ref in gen] == [0, 1, 2, 3]
    assert nbdist.get(tally.get.remote()) == 4


def test_a_cancelled_generator_ends_with_task_cancelled(backend) -> None:
    gate, tally = Gate.remote(), Tally.remote()
    gen = gated.remote(gate, tally)
    assert nbdist.get(next(gen)) == "first"
    poll(lambda: nbdist.get(tally.get.remote()) == 1, timeout=60)
    nbdist.cancel(gen)
    with pytest.raises(TaskCancelledError):
        for ref in gen:
            nbdist.get(ref)


def test_generator_methods_of_a_threaded_actor(backend) -> None:
    producer = Producer.remote()
    assert [nbdist.get(r) for r in producer.items.remote(3)] == ["item 0", "item 1", "item 2"]


def test_async_generator_methods(backend) -> None:
    producer = AsyncProducer.remote()
    assert [nbdist.get(r) for r in producer.items.remote(3)] == [100, 101, 102]


def test_dynamic_returns_a_ref_to_a_generator_of_refs(backend) -> None:
    ref = dynamic.remote(4)
    assert isinstance(ref, nbdist.ObjectRef)
    gen = nbdist.get(ref)
    assert type(gen).__name__ == "DynamicObjectRefGenerator"
    assert len(gen) == 4
    assert [nbdist.get(r) for r in gen] == [0, 1, 4, 9]


def test_num_returns_streaming_spelled_out(backend) -> None:
    gen = count.options(num_returns="streaming").remote(2)
    assert [nbdist.get(r) for r in gen] == [0, 10]


def test_a_bad_num_returns_is_refused(backend) -> None:
    with pytest.raises(ValueError, match="num_returns"):
        count.options(num_returns="lots")

"""``nbdist.util.multiprocessing.Pool`` and ``nbdist.util.ActorPool`` in detail, on both
backends: imap's failed items and laziness, the async methods' callbacks, close/terminate/join,
chunks, and the actor pool's pending submissions, ``push`` and lost actors (Ray's behaviour,
written as Ray's documentation writes it: ``import nbdist as ray``)."""

from __future__ import annotations

import asyncio
import itertools
import threading

import pytest

import nbdist as ray
from nbdist.exceptions import ActorDiedError, RayError
from nbdist.util.multiprocessing import Pool
from nbdist.util.multiprocessing import TimeoutError as PoolTimeout
from nbdist.util.multiprocessing.pool import PoolTaskError

pytestmark = pytest.mark.timeout(240)


def fail_on_2_and_5(x):
    if x in (2, 5):
        raise KeyError(x)
    return x


def square(x):
    return x * x


def my_actor_id(_):
    return ray.get_runtime_context().get_actor_id()


@ray.remote
class Gate:
    """Calls to ``wait`` return once ``open`` was called (an async actor: they wait together)."""

    def __init__(self):
        self.opened = asyncio.Event()

    async def wait(self):
        await self.opened.wait()
        return True

    def open(self):
        self.opened.set()


def through_gate(args):
    gate, value = args
    ray.get(gate.wait.remote())
    return value


def test_imap_yields_a_failed_item_in_its_place(backend: str) -> None:
    with Pool(2) as pool:
        out = list(pool.imap(fail_on_2_and_5, iter(range(7)), chunksize=3))
        assert [x for x in out if not isinstance(x, Exception)] == [0, 1, 3, 4, 6]
        assert [i for i, x in enumerate(out) if isinstance(x, PoolTaskError)] == [2, 5]
        assert isinstance(out[2].underlying, KeyError) and out[2].underlying.args == (2,)
        unordered = list(pool.imap_unordered(fail_on_2_and_5, range(7), chunksize=2))
        errors = sorted(x.underlying.args[0] for x in unordered if isinstance(x, PoolTaskError))
        assert errors == [2, 5]
        assert sorted(x for x in unordered if not isinstance(x, Exception)) == [0, 1, 3, 4, 6]
        it = pool.imap(square, [])
        with pytest.raises(StopIteration):
            it.next()


def test_imap_reads_the_iterable_as_results_are_taken(backend: str) -> None:
    taken: list[int] = []

    def numbers():
        for i in itertools.count():
            taken.append(i)
            yield i

    with Pool(1) as pool:
        squares = pool.imap(square, numbers())  # endless: only what is needed is read
        assert [next(squares) for _ in range(5)] == [0, 1, 4, 9, 16]
        assert len(taken) == 5 + 1  # the one actor's next chunk is in flight
    taken.clear()
    with Pool(2) as pool:
        firsts = list(itertools.islice(pool.imap_unordered(square, numbers(), chunksize=2), 4))
        assert len(firsts) == 4 and all(x >= 0 for x in firsts)


def test_imap_next_times_out_then_goes_on(backend: str) -> None:
    gate = Gate.remote()
    with Pool(2) as pool:
        it = pool.imap(through_gate, [(gate, 1), (gate, 2)])
        with pytest.raises(PoolTimeout):
            it.next(timeout=0.2)
        ray.get(gate.open.remote())
        assert (it.next(timeout=60), it.next(timeout=60)) == (1, 2)
        with pytest.raises(StopIteration):
            it.next()


def test_callbacks_run_once_in_a_pool_thread_before_the_result_is_ready(backend: str) -> None:
    calls: list = []

    def callback(value):
        calls.append(("ok", value, threading.current_thread() is threading.main_thread()))

    def error_callback(exc):
        calls.append(("error", exc, threading.current_thread() is threading.main_thread()))

    with Pool(2) as pool:
        assert pool.map_async(square, range(5), chunksize=2, callback=callback,
                              error_callback=error_callback).get(timeout=60) == [0, 1, 4, 9, 16]
        assert calls == [("ok", [0, 1, 4, 9, 16], False)]  # the whole list, at once
        calls.clear()
        failed = pool.map_async(fail_on_2_and_5, range(8), chunksize=1, callback=callback,
                                error_callback=error_callback)
        failed.wait(60)
        assert failed.ready() and not failed.successful()
        assert len(calls) == 1 and calls[0][0] == "error" and not calls[0][2]
        assert isinstance(calls[0][1], KeyError) and calls[0][1].args[0] in (2, 5)
        with pytest.raises(KeyError) as info:
            failed.get()
        assert info.value.args == (2,)  # get raises the first failed item's, as Ray's
        calls.clear()
        assert pool.apply_async(square, (3,), callback=callback).get(timeout=60) == 9
        assert pool.starmap_async(pow, [(2, 3)], callback=callback).get(timeout=60) == [8]
        assert [c[:2] for c in calls] == [("ok", 9), ("ok", [8])]


def test_a_failing_callback_still_lets_the_result_be_ready(backend: str) -> None:
    def broken(_value):
        raise RuntimeError("callback bug")

    with Pool(1) as pool:
        result = pool.apply_async(square, (4,), callback=broken)
        assert result.get(timeout=60) == 16 and result.successful()
        assert pool.map(square, []) == []
        empty: list = []
        assert pool.map_async(square, [], callback=empty.append).get(timeout=60) == []
        assert empty == [[]]


def test_apply_takes_kwds_and_rays_kwargs(backend: str) -> None:
    with Pool(1) as pool:
        assert pool.apply(pow, (2,), {"exp": 5}) == 32
        assert pool.apply(pow, (2,), kwargs={"exp": 4}) == 16
        assert pool.apply_async(pow, (3,), kwargs={"exp": 2}).get(timeout=60) == 9
        assert pool.apply(square, args=None, kwds={"x": 6}) == 36


def test_chunks_go_to_one_actor_each(backend: str) -> None:
    # With an actor replaced after each chunk, the actor ids show where the chunks were cut.
    pool = Pool(2, maxtasksperchild=1)
    try:
        ids = pool.map(my_actor_id, range(6), chunksize=3)
        assert ids[0] == ids[1] == ids[2] and ids[3] == ids[4] == ids[5]
        assert len(set(pool.map(my_actor_id, range(8), chunksize=1))) == 8
        with pytest.raises(ValueError):
            pool.map(square, range(3), chunksize=0)
    finally:
        pool.terminate()


def test_close_join_finishes_work_an_imap_has_not_sent_yet(backend: str) -> None:
    pool = Pool(1)
    it = pool.imap(square, range(6))
    assert next(it) == 0
    pool.close()
    with pytest.raises(ValueError, match="not running"):
        pool.imap(square, [1])
    with pytest.raises(ValueError, match="not running"):
        pool.map(square, [1])
    pool.join()
    assert list(it) == [1, 4, 9, 16, 25]


def test_terminate_fails_unfinished_work_and_join_returns(backend: str) -> None:
    gate = Gate.remote()
    pool = Pool(2)
    result = pool.map_async(through_gate, [(gate, i) for i in range(4)])
    assert not result.ready()
    pool.terminate()
    pool.join()
    assert result.ready() and not result.successful()
    with pytest.raises(RayError):
        result.get()
    ray.get(gate.open.remote())


@ray.remote
class Doubler:
    def double(self, v):
        return 2 * v


@ray.remote
class Waiter:
    async def double(self, v):
        return 2 * v

    async def never(self):
        await asyncio.sleep(600)


def double(actor, v):
    return actor.double.remote(v)


def test_push_runs_pending_submits_at_once(backend: str) -> None:
    a1, a2, a3 = Doubler.remote(), Doubler.remote(), Doubler.remote()
    pool = ray.util.ActorPool([a1])
    for v in (1, 2, 3):
        pool.submit(double, v)
    assert len(pool._pending_submits) == 2 and not pool.has_free()
    with pytest.raises(ValueError, match="already belongs"):
        pool.push(a1)  # busy: still a member
    pool.push(a2)
    assert len(pool._pending_submits) == 1 and not pool.has_free()
    pool.push(a3)
    assert len(pool._pending_submits) == 0 and not pool.has_free()
    assert [pool.get_next(timeout=60) for _ in range(3)] == [2, 4, 6]
    assert pool.has_free() and not pool.has_next()
    idle = {pool.pop_idle(), pool.pop_idle(), pool.pop_idle()}
    assert idle == {a1, a2, a3} and pool.pop_idle() is None and not pool.has_free()


def test_a_new_map_drops_results_nobody_took(backend: str) -> None:
    pool = ray.util.ActorPool([Waiter.remote(), Waiter.remote()])
    pool.submit(lambda a, _: a.never.remote(), None)  # never taken: the next map drops it
    assert list(pool.map(double, [1, 2, 3, 4, 5])) == [2, 4, 6, 8, 10]
    pool.submit(double, 100)  # an unordered map waits for it, and drops it
    assert sorted(pool.map_unordered(double, [1, 2, 3])) == [2, 4, 6]
    pool.submit(lambda a, _: a.never.remote(), None)
    pool.submit(double, 2)
    assert pool.get_next_unordered(timeout=60) == 4  # the later submission, taken first
    with pytest.raises(ValueError, match="after get_next_unordered"):
        pool.get_next()
    with pytest.raises(TimeoutError):
        pool.get_next_unordered(timeout=0.1, ignore_if_timedout=True)
    assert not pool.has_next()
    with pytest.raises(StopIteration):
        pool.get_next_unordered()


def test_a_dead_actor_is_not_lent_again(backend: str) -> None:
    alive, dead = Doubler.remote(), Doubler.remote()
    ray.kill(dead)
    pool = ray.util.ActorPool([alive, dead])  # the last is lent first
    pool.submit(double, 1)
    with pytest.raises(ActorDiedError):
        pool.get_next(timeout=60)
    assert list(pool.map(double, [1, 2, 3])) == [2, 4, 6]
    assert pool.pop_idle() == alive and pool.pop_idle() is None

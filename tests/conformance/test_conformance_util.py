"""``nbdist.util`` (ActorPool, Queue, multiprocessing.Pool, as_completed, map_unordered,
get_node_ip_address) and ``nbdist.experimental.tqdm_ray``, on both backends, written as Ray's
documentation writes them (``import nbdist as ray``, ``ray.util.X``)."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import time

import pytest
from polling import poll

import nbdist as ray
from nbdist.exceptions import TaskError
from nbdist.experimental import tqdm_ray
from nbdist.util.multiprocessing import Pool
from nbdist.util.multiprocessing import TimeoutError as PoolTimeout
from nbdist.util.queue import Empty, Full, Queue

pytestmark = pytest.mark.timeout(180)


@ray.remote
class Doubler:
    def double(self, v):
        return 2 * v

    def slow_double(self, v, delay):
        time.sleep(delay)
        return 2 * v


def test_actor_pool_map_as_in_rays_docs(backend: str) -> None:
    a1, a2 = Doubler.remote(), Doubler.remote()
    pool = ray.util.ActorPool([a1, a2])
    assert list(pool.map(lambda a, v: a.double.remote(v), [1, 2, 3, 4])) == [2, 4, 6, 8]
    out = pool.map_unordered(lambda a, v: a.slow_double.remote(v, 0.5 if v == 1 else 0),
                             [1, 2, 3])
    assert list(out)[-1] == 2  # the slow first value comes last


def test_actor_pool_submit_get_next_and_membership(backend: str) -> None:
    a1 = Doubler.remote()
    pool = ray.util.ActorPool([a1])
    pool.submit(lambda a, v: a.double.remote(v), 1)
    pool.submit(lambda a, v: a.double.remote(v), 2)  # queued: the only actor is busy
    assert not pool.has_free() and pool.pop_idle() is None
    assert pool.has_next()
    assert (pool.get_next(), pool.get_next()) == (2, 4)
    assert not pool.has_next() and pool.has_free()
    with pytest.raises(StopIteration):
        pool.get_next()
    assert pool.pop_idle() == a1
    pool.push(a1)
    with pytest.raises(ValueError):
        pool.push(a1)
    pool.submit(lambda a, v: a.slow_double.remote(v, 30), 5)
    with pytest.raises(TimeoutError):
        pool.get_next(timeout=0.05)
    with pytest.raises(TimeoutError):
        pool.get_next_unordered(timeout=0.05, ignore_if_timedout=True)
    assert not pool.has_next() and pool.has_free()  # the timed-out call was dropped


@ray.remote
def consume(queue, n):
    return [queue.get(timeout=30) for _ in range(n)]


@ray.remote
class Producer:
    def __init__(self, queue):
        self.queue = queue

    def produce(self, items):
        for item in items:
            self.queue.put(item)
        return len(items)


def test_queue_shared_with_tasks_and_actors(backend: str) -> None:
    queue = Queue()
    consumer = consume.remote(queue, 5)  # blocks in get until the actor puts
    producer = Producer.remote(queue)
    assert ray.get(producer.produce.remote(list(range(5)))) == 5
    assert ray.get(consumer) == [0, 1, 2, 3, 4]
    assert queue.empty() and queue.size() == 0 and len(queue) == 0
    queue.shutdown()


def test_queue_bounds_timeouts_and_batches(backend: str) -> None:
    queue = Queue(maxsize=2)
    queue.put_nowait_batch(["a", "b"])
    assert queue.full() and queue.qsize() == 2
    with pytest.raises(Full):
        queue.put_nowait("c")
    with pytest.raises(Full):
        queue.put("c", timeout=0.05)
    with pytest.raises(Full):
        queue.put_nowait_batch(["c"])
    with pytest.raises(Empty):
        queue.get_nowait_batch(3)
    assert queue.get_nowait_batch(2) == ["a", "b"]
    with pytest.raises(Empty):
        queue.get_nowait()
    with pytest.raises(Empty):
        queue.get(timeout=0.05)
    with pytest.raises(ValueError):
        queue.get(timeout=-1)

    async def round_trip():
        await queue.put_async(7)
        return await queue.get_async(timeout=30)

    assert asyncio.run(round_trip()) == 7
    queue.shutdown()
    assert queue.actor is None


def square(x):
    return x * x


def fail_on_three(x):
    if x == 3:
        raise KeyError("three")
    return x


def test_multiprocessing_pool_like_the_stdlib(backend: str) -> None:
    with Pool(processes=2) as pool:
        assert pool.map(square, range(10)) == [x * x for x in range(10)]
        assert list(pool.imap(square, range(6), chunksize=2)) == [0, 1, 4, 9, 16, 25]
        assert sorted(pool.imap_unordered(square, range(6))) == [0, 1, 4, 9, 16, 25]
        assert pool.starmap(pow, [(2, 3), (3, 2)]) == [8, 9]
        assert pool.apply(square, (7,)) == 49
        seen: list = []
        result = pool.map_async(square, [1, 2], callback=seen.append)
        assert result.get(timeout=60) == [1, 4]
        assert result.ready() and result.successful()
        poll(lambda: seen == [[1, 4]])
        with pytest.raises(KeyError):
            pool.map(fail_on_three, range(5))
        errors: list = []
        failed = pool.apply_async(fail_on_three, (3,), error_callback=errors.append)
        failed.wait(60)
        assert not failed.successful()
        poll(lambda: len(errors) == 1 and isinstance(errors[0], KeyError))
        slow = pool.apply_async(time.sleep, (30,))
        with pytest.raises(PoolTimeout):
            slow.get(timeout=0.05)
        with pytest.raises(ValueError):
            slow.successful()


def test_multiprocessing_pool_close_join_and_initializer(backend: str) -> None:
    pool = Pool(1, initializer=print, initargs=("pool actor up",))
    result = pool.map_async(square, [3])
    pool.close()
    with pytest.raises(ValueError):
        pool.map(square, [1])
    pool.join()
    assert result.get(timeout=0) == [9]
    with pytest.raises(ValueError):
        Pool(processes=64)  # more processes than the cluster's CPUs


@ray.remote
def sleep_then(x, delay):
    time.sleep(delay)
    return x


def test_as_completed_and_map_unordered(backend: str) -> None:
    refs = [sleep_then.remote(0, 1.0), sleep_then.remote(1, 0)]
    assert list(ray.util.as_completed(refs, chunk_size=1)) == [1, 0]
    got = list(ray.util.as_completed(refs, chunk_size=2, yield_obj_refs=True))
    assert all(isinstance(r, ray.ObjectRef) for r in got) and len(got) == 2

    @ray.remote
    def inc(x):
        return x + 1

    assert sorted(ray.util.map_unordered(inc, range(7), backpressure_size=2, chunk_size=1)) \
        == list(range(1, 8))
    with pytest.raises(ValueError):
        list(ray.util.map_unordered(inc, [1], backpressure_size=0))


def test_get_node_ip_address_is_an_ip_in_driver_and_tasks(backend: str) -> None:
    @ray.remote
    def where():
        return ray.util.get_node_ip_address()

    here = ray.util.get_node_ip_address()
    ipaddress.ip_address(here)
    assert ray.get(where.remote()) == here  # one node: the tasks run where the driver is


@ray.remote
def count_with_bar(n):
    for _ in tqdm_ray.tqdm(range(n), desc="counting", flush_interval_s=0):
        pass
    print("after the bar")
    return n


def test_tqdm_ray_bar_in_a_task_renders_in_the_driver(backend: str) -> None:
    states: list = []
    tqdm_ray.set_renderer(states.append)
    try:
        assert ray.get(count_with_bar.remote(3)) == 3
        poll(lambda: any(s["closed"] for s in states))
    finally:
        tqdm_ray.set_renderer(None)
    final = [s for s in states if s["closed"]][-1]
    assert (final["desc"], final["x"], final["total"], final["task"]) == (
        "counting", 3, 3, "count_with_bar")
    assert final["pid"] != os.getpid()
    assert [s["x"] for s in states if not s["closed"]] == [0, 1, 2, 3]


def test_pool_error_keeps_the_users_type_through_get(backend: str) -> None:
    # A pool call's failure is the user's exception itself, not a task error wrapper.
    with Pool(1) as pool, pytest.raises(KeyError) as info:
        pool.apply(fail_on_three, (3,))
    assert not isinstance(info.value, TaskError)

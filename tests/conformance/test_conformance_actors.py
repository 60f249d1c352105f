"""Actors: state, ordering, handles, names, concurrency and kill, on both backends."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import nbdist
from nbdist.exceptions import ActorDiedError

pytestmark = pytest.mark.timeout(180)


@nbdist.remote
class Counter:
    def __init__(self, start=0):
        self.n = start

    def inc(self, k=1):
        self.n += k
        return self.n

    def log(self):
        return self.n

    @nbdist.method(num_returns=2)
    def both(self):
        return self.n, -self.n


@nbdist.remote
def bump(counter, times):
    return nbdist.get([counter.inc.remote() for _ in range(times)])[-1]


@nbdist.remote
class Gate:
    """An async actor: calls wait on each other, so they must run concurrently."""

    def __init__(self):
        self.arrived = 0

    async def meet(self, expected):
        self.arrived += 1
        while self.arrived < expected:
            await asyncio.sleep(0.01)
        return self.arrived


@nbdist.remote(max_concurrency=2)
class Threaded:
    def __init__(self):
        self.event = threading.Event()

    def wait_for_other(self):
        return self.event.wait(30)

    def release(self):
        self.event.set()
        return True


@nbdist.remote
class Sleeper:
    def nap(self, seconds):
        time.sleep(seconds)
        return seconds


def test_state_and_submission_order(backend) -> None:
    c = Counter.remote(10)
    refs = [c.inc.remote(k) for k in range(1, 6)]
    assert nbdist.get(refs) == [11, 13, 16, 20, 25]
    assert isinstance(c, nbdist.ActorHandle)


def test_method_with_num_returns(backend) -> None:
    c = Counter.remote(3)
    a, b = c.both.remote()
    assert nbdist.get([a, b]) == [3, -3]


def test_handle_passed_to_tasks(backend) -> None:
    c = Counter.remote()
    assert nbdist.get([bump.remote(c, 5), bump.remote(c, 5)])[-1] <= 10
    assert nbdist.get(c.log.remote()) == 10


def test_named_actor_is_found_by_name(backend) -> None:
    c = Counter.options(name=f"counter-{backend}").remote(1)
    found = nbdist.get_actor(f"counter-{backend}")
    assert nbdist.get(found.inc.remote()) == 2
    assert nbdist.get(c.log.remote()) == 2
    with pytest.raises(ValueError):
        nbdist.get_actor("no-such-actor")


def test_named_actor_in_a_namespace(backend) -> None:
    _held = Counter.options(name="spaced", namespace="elsewhere").remote(7)  # lives while held
    found = nbdist.get_actor("spaced", namespace="elsewhere")
    assert nbdist.get(found.log.remote()) == 7
    with pytest.raises(ValueError):
        nbdist.get_actor("spaced")


def test_async_actor_runs_calls_concurrently(backend) -> None:
    g = Gate.remote()
    assert nbdist.get([g.meet.remote(3) for _ in range(3)], timeout=60) == [3, 3, 3]


def test_max_concurrency_runs_calls_in_threads(backend) -> None:
    t = Threaded.remote()
    waiting = t.wait_for_other.remote()
    assert nbdist.get(t.release.remote(), timeout=60) is True
    assert nbdist.get(waiting, timeout=60) is True


def test_killed_actor_raises_actor_died_error(backend) -> None:
    s = Sleeper.remote()
    assert nbdist.get(s.nap.remote(0)) == 0
    pending = s.nap.remote(60)
    nbdist.kill(s)
    with pytest.raises(ActorDiedError):
        nbdist.get(pending, timeout=60)
    with pytest.raises(ActorDiedError):
        nbdist.get(s.nap.remote(0), timeout=60)


def test_unknown_method_and_direct_calls_are_refused(backend) -> None:
    c = Counter.remote()
    with pytest.raises(AttributeError, match="inc"):
        c.nope  # noqa: B018
    with pytest.raises(TypeError, match=r"\.remote\("):
        c.inc()

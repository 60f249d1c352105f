"""ActorPool: spread calls over a fixed set of actors (Ray's ``ray.util.ActorPool``).

The pool lends one idle actor per call: ``fn(actor, value)`` must submit work to that actor and
return its ref (or list of refs). The actor is busy until its result has been taken with
``get_next`` (in submission order) or ``get_next_unordered`` (first ready); only then does it
go back to the idle list and the oldest waiting submission (queued while every actor was busy)
takes it. State, all owned by the caller's thread (the pool is not thread-safe, as Ray's):

    _idle_actors       actors free for work (a stack: the last returned is lent first)
    _future_to_actor   result key (a ref, or a tuple of refs) -> (submission index, actor)
    _index_to_future   submission index -> result (what ``fn`` returned)
    _pending_submits   (fn, value) submitted while no actor was idle, oldest first
    _next_task_index / _next_return_index   the next submission index to hand out / to
                       return in order

The names are Ray's own, so code (and tests) that look at the bookkeeping read the same
fields. ``push`` adds an actor as if it had just finished: it takes the oldest waiting
submission at once.

An actor whose call raised ActorDiedError is not lent again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from nbdist.driver.api import get, wait
from nbdist.exceptions import ActorDiedError

_TIMEOUT_MSG = "Timed out waiting for result"


def _key(result: Any) -> Any:
    return tuple(result) if isinstance(result, list) else result


def _first_ref(result: Any) -> Any:
    return result[0] if isinstance(result, (list, tuple)) else result


class ActorPool:
    """A fixed pool of actors that ``map``/``submit`` lend out one call at a time."""

    def __init__(self, actors: Iterable[Any]) -> None:
        self._idle_actors: list[Any] = list(actors)
        self._future_to_actor: dict[Any, tuple[int, Any]] = {}
        self._index_to_future: dict[int, Any] = {}
        self._pending_submits: list[tuple[Callable[[Any, Any], Any], Any]] = []
        self._next_task_index = 0
        self._next_return_index = 0

    def map(self, fn: Callable[[Any, Any], Any], values: Iterable[Any]) -> Iterator[Any]:
        """Results of ``fn(actor, v)`` for every value, in the order of ``values``."""
        self._drop_pending(ordered=True)
        for v in values:
            self.submit(fn, v)

        def results() -> Iterator[Any]:
            while self.has_next():
                yield self.get_next()

        return results()

    def map_unordered(self, fn: Callable[[Any, Any], Any],
                      values: Iterable[Any]) -> Iterator[Any]:
        """Like `map`, but each result as soon as it is ready."""
        self._drop_pending(ordered=False)
        for v in values:
            self.submit(fn, v)

        def results() -> Iterator[Any]:
            while self.has_next():
                yield self.get_next_unordered()

        return results()

    def _drop_pending(self, ordered: bool) -> None:
        # A new map starts from a clean slate: results nobody took are discarded (Ray's rule).
        # An ordered map skips the unfinished ones; an unordered one waits for them (Ray polls
        # with a zero timeout until they are done; a plain wait has the same outcome).
        while self.has_next():
            if not ordered:
                self.get_next_unordered()
                continue
            try:
                self.get_next(timeout=0, ignore_if_timedout=True)
            except TimeoutError:
                pass

    def submit(self, fn: Callable[[Any, Any], Any], value: Any) -> None:
        """Run ``fn(actor, value)`` on an idle actor now, or once one is free."""
        if not self._idle_actors:
            self._pending_submits.append((fn, value))
            return
        actor = self._idle_actors.pop()
        result = fn(actor, value)
        self._future_to_actor[_key(result)] = (self._next_task_index, actor)
        self._index_to_future[self._next_task_index] = result
        self._next_task_index += 1

    def has_next(self) -> bool:
        """Whether a submitted result is still to be returned."""
        return bool(self._future_to_actor)

    def get_next(self, timeout: float | None = None, ignore_if_timedout: bool = False) -> Any:
        """The next result in submission order, waiting up to ``timeout`` seconds.

        TimeoutError when it is not ready in time; with ``ignore_if_timedout`` that result is
        skipped for good (its actor goes back to the pool) before the error is raised."""
        if not self.has_next():
            raise StopIteration("No more results to get")
        if self._next_return_index >= self._next_task_index:
            raise ValueError("It is not allowed to call get_next() after get_next_unordered().")
        result = self._index_to_future[self._next_return_index]
        timed_out = False
        if timeout is not None:
            ready, _ = wait([_first_ref(result)], timeout=timeout)
            if not ready:
                if not ignore_if_timedout:
                    raise TimeoutError(_TIMEOUT_MSG)
                timed_out = True
        del self._index_to_future[self._next_return_index]
        self._next_return_index += 1
        _, actor = self._future_to_actor.pop(_key(result))
        if timed_out:
            self._return_actor(actor)
            raise TimeoutError(f"{_TIMEOUT_MSG}. The task {result} has been ignored.")
        return self._take(result, actor)

    def get_next_unordered(self, timeout: float | None = None,
                           ignore_if_timedout: bool = False) -> Any:
        """Whichever pending result is ready first, waiting up to ``timeout`` seconds."""
        if not self.has_next():
            raise StopIteration("No more results to get")
        firsts = {_first_ref(k): k for k in self._future_to_actor}
        ready, _ = wait(list(firsts), num_returns=1, timeout=timeout)
        if ready:
            key = firsts[ready[0]]
        elif ignore_if_timedout:
            key = next(iter(self._future_to_actor))
        else:
            raise TimeoutError(_TIMEOUT_MSG)
        index, actor = self._future_to_actor.pop(key)
        result = self._index_to_future.pop(index)
        self._next_return_index = max(self._next_return_index, index + 1)
        if not ready:
            self._return_actor(actor)
            raise TimeoutError(f"{_TIMEOUT_MSG}. The task {result} has been ignored.")
        return self._take(result, actor)

    def _take(self, result: Any, actor: Any) -> Any:
        alive = True
        try:
            return get(result)
        except ActorDiedError:
            alive = False
            raise
        finally:
            self._return_actor(actor, alive)

    def _return_actor(self, actor: Any, alive: bool = True) -> None:
        if alive:
            self._idle_actors.append(actor)
        if self._pending_submits and self._idle_actors:
            self.submit(*self._pending_submits.pop(0))

    def has_free(self) -> bool:
        """Whether an actor is idle and no submission waits for one."""
        return bool(self._idle_actors) and not self._pending_submits

    def pop_idle(self) -> Any:
        """Take an idle actor out of the pool; None when none is free."""
        return self._idle_actors.pop() if self.has_free() else None

    def push(self, actor: Any) -> None:
        """Add ``actor`` to the pool (it takes a waiting submission, if any)."""
        busy = [a for _, a in self._future_to_actor.values()]
        if actor in self._idle_actors or actor in busy:
            raise ValueError("Actor already belongs to current ActorPool")
        self._return_actor(actor)

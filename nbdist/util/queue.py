"""Queue: a first-in first-out queue shared by the driver, tasks and actors (Ray's
``ray.util.queue.Queue``).

The items live in one async actor (`_QueueActor`) holding an ``asyncio.Queue``: a blocking
``get`` on an empty queue (or ``put`` on a full one) is a coroutine parked in the actor, so it
does not stop other callers' puts and gets from running. The `Queue` object is only a handle to
that actor plus ``maxsize``; it pickles with the handle, so passing a Queue to a task or an
actor shares the same queue. The actor lives while any Queue copy does, or until `shutdown`.

Errors: the actor raises `Empty` / `Full` (subclasses of the stdlib ``queue`` module's); the
caller re-raises them as plain `Empty` / `Full`, so ``except queue.Empty`` works as with the
stdlib queue. Timeouts are enforced in the actor, so they hold for callers anywhere.
"""

from __future__ import annotations

import asyncio
import queue as _stdlib_queue
from collections.abc import Iterable
from typing import Any

import nbdist

__all__ = ["Empty", "Full", "Queue"]


class Empty(_stdlib_queue.Empty):
    """Raised by a get on an empty queue that does not block, or that timed out."""


class Full(_stdlib_queue.Full):
    """Raised by a put on a full queue that does not block, or that timed out."""


class _QueueActor:
    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self.queue: asyncio.Queue[Any] = asyncio.Queue(maxsize)

    async def qsize(self) -> int:
        return self.queue.qsize()

    async def empty(self) -> bool:
        return self.queue.empty()

    async def full(self) -> bool:
        return self.queue.full()

    async def put(self, item: Any, timeout: float | None = None) -> None:
        try:
            await asyncio.wait_for(self.queue.put(item), timeout)
        except asyncio.TimeoutError:
            raise Full(f"The queue stayed full for {timeout} s.") from None

    async def get(self, timeout: float | None = None) -> Any:
        try:
            return await asyncio.wait_for(self.queue.get(), timeout)
        except asyncio.TimeoutError:
            raise Empty(f"The queue stayed empty for {timeout} s.") from None

    async def put_nowait(self, item: Any) -> None:
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            raise Full(f"The queue is full ({self.maxsize} items).") from None

    async def put_nowait_batch(self, items: list[Any]) -> None:
        if self.maxsize > 0 and len(items) + self.queue.qsize() > self.maxsize:
            raise Full(f"Cannot add {len(items)} items to a queue holding "
                       f"{self.queue.qsize()} of at most {self.maxsize}.")
        for item in items:
            self.queue.put_nowait(item)

    async def get_nowait(self) -> Any:
        try:
            return self.queue.get_nowait()
        except asyncio.QueueEmpty:
            raise Empty("The queue is empty.") from None

    async def get_nowait_batch(self, num_items: int) -> list[Any]:
        if num_items > self.queue.qsize():
            raise Empty(f"Cannot get {num_items} items from a queue holding "
                        f"{self.queue.qsize()}.")
        return [self.queue.get_nowait() for _ in range(num_items)]

    async def ping(self) -> None:
        return None


_QueueActorClass = nbdist.remote(_QueueActor)


def _check_timeout(timeout: float | None) -> None:
    if timeout is not None and timeout < 0:
        raise ValueError("'timeout' must be a non-negative number")


def _plain(exc: BaseException) -> BaseException:
    """The queue error a caller catches: plain Empty/Full with the actor's message."""
    for kind in (Empty, Full):
        if isinstance(exc, kind):
            return kind(*getattr(exc, "args", ()))
    return exc


class Queue:
    """A FIFO queue in the cluster; ``maxsize`` 0 is unbounded. ``actor_options`` go to
    the queue actor's ``.options(...)`` (resources, name, ...)."""

    def __init__(self, maxsize: int = 0, actor_options: dict[str, Any] | None = None) -> None:
        self.maxsize = maxsize
        self.actor: Any = _QueueActorClass.options(**(actor_options or {})).remote(maxsize)

    def _call(self, method: str, *args: Any) -> Any:
        try:
            return nbdist.get(getattr(self.actor, method).remote(*args))
        except (Empty, Full) as exc:
            raise _plain(exc) from None

    async def _acall(self, method: str, *args: Any) -> Any:
        try:
            return await getattr(self.actor, method).remote(*args)
        except (Empty, Full) as exc:
            raise _plain(exc) from None

    def __len__(self) -> int:
        return self.size()

    def size(self) -> int:
        """How many items the queue holds."""
        return int(self._call("qsize"))

    def qsize(self) -> int:
        return self.size()

    def empty(self) -> bool:
        return bool(self._call("empty"))

    def full(self) -> bool:
        return bool(self._call("full"))

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        """Add ``item``; when full, wait up to ``timeout`` s (forever: None) if ``block``,
        else raise Full at once."""
        if not block:
            self._call("put_nowait", item)
            return
        _check_timeout(timeout)
        self._call("put", item, timeout)

    async def put_async(self, item: Any, block: bool = True,
                        timeout: float | None = None) -> None:
        """`put` for coroutines: awaits instead of blocking the thread."""
        if not block:
            await self._acall("put_nowait", item)
            return
        _check_timeout(timeout)
        await self._acall("put", item, timeout)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        """The oldest item; when empty, wait up to ``timeout`` s (forever: None) if ``block``,
        else raise Empty at once."""
        if not block:
            return self._call("get_nowait")
        _check_timeout(timeout)
        return self._call("get", timeout)

    async def get_async(self, block: bool = True, timeout: float | None = None) -> Any:
        """`get` for coroutines: awaits instead of blocking the thread."""
        if not block:
            return await self._acall("get_nowait")
        _check_timeout(timeout)
        return await self._acall("get", timeout)

    def put_nowait(self, item: Any) -> None:
        self.put(item, block=False)

    def put_nowait_batch(self, items: Iterable[Any]) -> None:
        """Add all ``items`` in order, or none of them (Full) if they do not fit."""
        if not isinstance(items, Iterable):
            raise TypeError("Argument 'items' must be an Iterable")
        self._call("put_nowait_batch", list(items))

    def get_nowait(self) -> Any:
        return self.get(block=False)

    def get_nowait_batch(self, num_items: int) -> list[Any]:
        """The ``num_items`` oldest items, or none of them (Empty) if fewer are queued."""
        if not isinstance(num_items, int):
            raise TypeError("Argument 'num_items' must be an int")
        if num_items < 0:
            raise ValueError("'num_items' must be nonnegative")
        return list(self._call("get_nowait_batch", num_items))

    def shutdown(self, force: bool = False, grace_period_s: float = 5) -> None:
        """Stop the queue's actor (its items are gone). Unless ``force``, calls already sent
        to it get up to ``grace_period_s`` to finish first."""
        if self.actor is not None:
            if not force:
                nbdist.wait([self.actor.ping.remote()], timeout=grace_period_s)
            nbdist.kill(self.actor, no_restart=True)
        self.actor = None

"""The parts of the core client (`nbdist.driver.runtime.CoreClient`) that own a piece of
state of their own: the worker-side task context, ref placeholders in pickled arguments, leases
on arena ranges, the table of blocked getters, and requests waiting for the node's answer
(layer L2)."""

from __future__ import annotations

import collections
import itertools
import threading
from collections.abc import Callable, Sequence
from typing import Any

from nbdist.exceptions import ClusterError, ObjectStoreFullError
from nbdist.objects.refs import ObjectRef
from nbdist.wire import protocol as P
from nbdist.wire import serialization


class TaskContext(threading.local):
    """What the current thread is running (worker side): read by get_runtime_context()."""

    def __init__(self) -> None:
        self.task_id = 0
        self.actor_id = 0
        self.job = 0
        self.name = ""
        self.link: Any = None  # the direct link the running call came on (worker side)
        # (placement group id, capture child tasks, bundle index) of the running work, or None
        self.group: tuple[str, bool, int] | None = None
        self.spec: tuple | None = None  # the running call's spec (the runtime context's)


class Dep:
    """Placeholder for the i-th top-level ref argument inside a task's pickled arguments."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __reduce__(self) -> Any:
        return (Dep, (self.index,))


# Arguments that are refs travel as placeholders: simple to pickle (see serialization._plain).
serialization.register_plain(Dep)


class Lease:
    """This process's use of one arena range the node sent it a location of. It dies with the
    last view read from it (and the cached location, if any); dying queues ``UNPIN``, sent
    like a ref release (a deque append: safe from any thread, and from the collector)."""

    __slots__ = ("ops", "offset")

    def __init__(self, ops: collections.deque[tuple], offset: int) -> None:
        self.ops = ops
        self.offset = offset

    def __del__(self) -> None:
        self.ops.append((P.UNPIN, self.offset))


class Flag:
    """What a waiter waits on: waits pump the connection themselves (`CoreClient._pump_until`)
    and only look at the flag, so no condition variable is needed."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


class Waiter:
    __slots__ = ("remaining", "event", "wait_id", "need", "base", "total", "last")

    def __init__(self, remaining: int) -> None:
        self.remaining = remaining
        self.event = Flag()
        self.wait_id = 0  # set for a driver's get/wait: progress is published (rate-limited)
        self.need = remaining
        self.base = 0
        self.total = 0
        self.last = 0.0


class WaitTable:
    """Which `Waiter` waits on which object: one waiter object for a get of 100,000 refs, not
    100,000 lists for the garbage collector to scan. The caller holds the client's lock."""

    __slots__ = ("_by_id",)

    def __init__(self) -> None:
        self._by_id: dict[int, Waiter | list[Waiter]] = {}

    def add(self, oids: list[int], waiter: Waiter, ready: Callable[[int], bool]) -> None:
        """Register ``waiter`` on those of ``oids`` that are not ``ready`` yet."""
        by_id = self._by_id
        for oid in oids:
            if ready(oid):
                waiter.remaining -= 1
                continue
            other = by_id.get(oid)
            if other is None:
                by_id[oid] = waiter
            elif isinstance(other, list):
                other.append(waiter)
            else:
                by_id[oid] = [other, waiter]
        if waiter.remaining <= 0:
            waiter.event.set()

    def remove(self, oids: list[int], waiter: Waiter) -> None:
        by_id = self._by_id
        for oid in oids:
            other = by_id.get(oid)
            if other is waiter:
                del by_id[oid]
            elif isinstance(other, list) and waiter in other:
                other.remove(waiter)
                if not other:
                    del by_id[oid]

    def pop(self, oid: int) -> tuple[Waiter, ...]:
        """The waiters of an object that just arrived (each to be counted down once)."""
        found = self._by_id.pop(oid, None)
        if found is None:
            return ()
        return tuple(found) if isinstance(found, list) else (found,)

    def pop_all(self) -> list[Waiter]:
        out = [w for found in self._by_id.values()
               for w in (found if isinstance(found, list) else (found,))]
        self._by_id.clear()
        return out


class ControlRequests:
    """Requests to the node that wait for its answer (``CONTROL`` / ``CONTROL_REPLY``): each
    is a slot ``[event, ok, result]`` keyed by request id."""

    def __init__(self) -> None:
        self._slots: dict[int, list[Any]] = {}
        self._ids = itertools.count(1)

    def open(self) -> tuple[int, list[Any]]:
        req_id = next(self._ids)
        slot: list[Any] = [threading.Event(), None, None]
        self._slots[req_id] = slot
        return req_id, slot

    def abandon(self, req_id: int) -> None:
        self._slots.pop(req_id, None)

    def answer(self, req_id: int, ok: bool, result: Any) -> None:
        slot = self._slots.pop(req_id, None)
        if slot is not None:
            slot[1], slot[2] = ok, result
            slot[0].set()

    def fail_all(self, reason: str) -> None:
        slots = list(self._slots.values())
        self._slots.clear()
        for slot in slots:
            slot[1], slot[2] = False, reason
            slot[0].set()


def raise_control_error(result: Any) -> None:
    """The error a failed control request reports, as the exception it names."""
    text = str(result)
    if text.startswith("ValueError: "):
        raise ValueError(text[len("ValueError: "):])
    if text.startswith("ObjectStoreFullError: "):
        raise ObjectStoreFullError(text[len("ObjectStoreFullError: "):])
    raise ClusterError(text)


def encode_args(args: Sequence[Any], kwargs: dict[str, Any], what: str, inline_max: int,
                put: Callable[[Any], ObjectRef]
                ) -> tuple[bytes, tuple[int, ...], tuple[int, ...], list[ObjectRef]]:
    """Pickle arguments with top-level refs as placeholders.

    Arguments larger than ``inline_max`` go through the object store (``put``). Returns (blob,
    dep ids, contained ids, refs to keep alive until submitted)."""
    if not args and not kwargs:
        return b"", (), (), []
    if not kwargs and all(type(a) is ObjectRef for a in args):
        # Only refs (f.remote(x), g.remote(x, y)): the values, in order, are the deps.
        return P.ARGS_ALL_DEPS, tuple(a.id for a in args), (), []
    deps: list[int] = []
    keep: list[ObjectRef] = []

    def sub(value: Any) -> Any:
        if isinstance(value, ObjectRef):
            deps.append(value.id)
            return Dep(len(deps) - 1)
        return value

    new_args = [sub(a) for a in args]
    new_kwargs = {k: sub(v) for k, v in kwargs.items()} if kwargs else {}
    try:
        parts, size, contained = serialization.dumps((new_args, new_kwargs))
    except Exception as exc:
        raise serialization.argument_error(args, kwargs, what, exc) from exc
    if size > inline_max:
        # Large arguments travel through the object store, not inside the task message.
        big = serialization.too_big_inline
        for i, value in enumerate(new_args):
            if not isinstance(value, Dep) and big(value, inline_max):
                ref = put(value)
                keep.append(ref)
                new_args[i] = sub(ref)
        for k, value in list(new_kwargs.items()):
            if not isinstance(value, Dep) and big(value, inline_max):
                ref = put(value)
                keep.append(ref)
                new_kwargs[k] = sub(ref)
        parts, size, contained = serialization.dumps((new_args, new_kwargs))
    return serialization.join(parts), tuple(deps), contained, keep

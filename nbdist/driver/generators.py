"""Generator tasks on nbdist's engine: ``num_returns="streaming"`` and ``"dynamic"`` (layer L2).

Streaming (the default for a generator function or method, as in Ray). The caller gives the
task an id from a region of its own id space kept for streams (`STREAM_BIT` of the sequence,
so ordinary ids never reach it): task ``T`` owns ``T + 1`` (its one declared return, the
*end*), its items ``T + 2 + i`` and, with backpressure, acknowledgements ``T + ACK + i``. The
first argument of the call is a `StreamMarker`, which tells the worker to stream::

    caller   submit T (marker, args)             ObjectRefGenerator: for item i, wait for
                                                  T+2+i or the end, whichever comes first
    worker   for each value the generator yields: PUT it as T+2+i at its node (holding it),
             after waiting for ack i-N when backpressure is N; when the generator returns,
             the end's value is `StreamEnd(refs of every item)`; if it raised, the error is
             stored as one more item, so the caller's get raises at that item
    caller   after taking item i, with backpressure: PUT ack i (held until the generator goes)

The end holds every item (its value contains their refs), so an item lives while the
generator or any of its refs does. An item PUT is ordered before the end's RESULT on the
worker's connection, and the worker's holds go after it, so no item is freed before the end
holds it. A worker on another node than the caller cannot store at the caller's ids: it puts
its items under its own ids and the caller takes them from the end when the task is over
(correct, but nothing streams). A streaming task is not retried after a crash: its items
would be stored twice. An error its ``retry_exceptions`` covers runs the generator again in
the same call (`StreamMarker.retries` times), dropping the values that would take the
places of the items already stored, as Ray does.

Dynamic. ``num_returns="dynamic"``: the task's one return is a `DynamicObjectRefGenerator`
(a list of refs, one per yielded value, and one more holding the error if the generator
raised), made in the worker when the generator is done.

Rebuilt. A generator task another node ran leaves its values in that node's store; when that
node is lost, the caller's node runs the task again with ``extra["rebuild"]``: the ids of the
values to make again, by index (`nbdist.scheduler.lineage`). `run` then stores the i-th value
the generator yields under the i-th id (or its error, if it raises there); the task declares no
return. The refs the caller holds are the same, as in Ray.

Static. ``num_returns=N`` on a generator function (N = 1 too): the worker takes its values for
the N returns (`static_returns`); if it raises before the N-th, the returns it did not yield
hold the error. A ``"dynamic"`` task whose function returns no generator fails.
"""

from __future__ import annotations

import inspect
import itertools
import sys
import time
from collections.abc import Iterator
from typing import Any

from nbdist.backends.base import current
from nbdist.exceptions import GetTimeoutError
from nbdist.ids import CLIENT_SHIFT, NODE_SHIFT
from nbdist.objects.refs import ObjectRef
from nbdist.wire import protocol as P
from nbdist.wire import serialization

STREAM_BIT = 1 << 39
ITEM_BITS = 21
ACK = 1 << (ITEM_BITS - 1)
MAX_ITEMS = ACK - 2
MAX_STREAMS = 1 << (39 - ITEM_BITS)
_streams = itertools.count(1)


class StreamMarker:
    """The first argument of a streaming call: stream, with at most ``backpressure``
    unconsumed items (0: no limit); run the generator again up to ``retries`` times (-1: no
    limit) when it raises an error its ``retry_exceptions`` covers."""

    __slots__ = ("backpressure", "retries")

    def __init__(self, backpressure: int, retries: int = 0) -> None:
        self.backpressure = backpressure
        self.retries = retries

    def __reduce__(self) -> Any:
        return (StreamMarker, (self.backpressure, self.retries))


class StreamEnd:
    """The value of a streaming task's end: its items' refs, in order."""

    __slots__ = ("refs",)

    def __init__(self, refs: list[ObjectRef]) -> None:
        self.refs = refs

    def __reduce__(self) -> Any:
        return (StreamEnd, (self.refs,))


class DynamicObjectRefGenerator:
    """The value of a ``num_returns="dynamic"`` task: a ref per value its generator yielded."""

    def __init__(self, refs: list[ObjectRef]) -> None:
        self._refs = list(refs)

    def __iter__(self) -> Iterator[ObjectRef]:
        return iter(self._refs)

    def __len__(self) -> int:
        return len(self._refs)

    def __reduce__(self) -> Any:
        return (DynamicObjectRefGenerator, (self._refs,))

    def __repr__(self) -> str:
        return f"DynamicObjectRefGenerator({len(self._refs)} refs)"


def stream_task_id(client: Any) -> int:
    """A fresh streaming task id in ``client``'s id space."""
    k = next(_streams)
    if k >= MAX_STREAMS:
        raise RuntimeError(
            f"This process has started {MAX_STREAMS - 1} streaming generator tasks, the most "
            "one connection can; restart the cluster (nbdist.shutdown(); nbdist.init()).")
    return (client.client_no << CLIENT_SHIFT) | STREAM_BIT | (k << ITEM_BITS)


def backpressure_of(opts: dict[str, Any]) -> int:
    value = opts.get("_generator_backpressure_num_objects")
    if value is None or value == -1:
        return 0
    if not isinstance(value, int) or value <= 0:
        raise ValueError("_generator_backpressure_num_objects must be a positive int or -1, "
                         f"not {value!r}.")
    return value


class ObjectRefGenerator:
    """Refs to a streaming task's values, in order, as the task yields them.

    Iterate it (``for ref in gen``, ``next(gen)``, ``async for``); pass it to ``wait`` (ready
    when the next ref is); ``completed()`` is a ref ready when the task is over."""

    def __init__(self, task_id: int, end: ObjectRef, backpressure: int) -> None:
        self._task_id = task_id
        self._end = end
        self._backpressure = backpressure
        self._index = 0
        self._refs: list[ObjectRef] | None = None
        self._acks: list[ObjectRef] = []

    def __iter__(self) -> ObjectRefGenerator:
        return self

    def __next__(self) -> ObjectRef:
        return self._next(None)

    def __aiter__(self) -> ObjectRefGenerator:
        return self

    async def __anext__(self) -> ObjectRef:
        # (StopIteration cannot cross a future: the end comes back as None.)
        import asyncio
        ref = await asyncio.get_running_loop().run_in_executor(None, self._next_or_none)
        if ref is None:
            raise StopAsyncIteration
        return ref

    def _next_or_none(self) -> ObjectRef | None:
        try:
            return self._next(None)
        except StopIteration:
            return None

    def completed(self) -> ObjectRef:
        """A ref that is ready when the task has ended (its get raises what the task
        raised outside its generator, e.g. a crash or a cancel)."""
        return self._end

    def is_finished(self) -> bool:
        """Whether the task has ended and every ref was taken."""
        if self._refs is None:
            ready, _ = current.backend.wait([self._end], 1, 0, True)
            if not ready:
                return False
            self._read_end()
        assert self._refs is not None
        return self._index >= len(self._refs)

    def _native(self) -> Any:
        """The backend's own generator, when that backend waits on generators itself."""
        return None

    def _probe(self) -> list[ObjectRef]:
        """Refs to wait on for the next item: ready when one is."""
        if self._refs is not None:
            return [self._refs[self._index]] if self._index < len(self._refs) else [self._end]
        return [ObjectRef(self._task_id + 2 + self._index), self._end]

    def _next(self, timeout: float | None) -> ObjectRef:
        while True:
            i = self._index
            if self._refs is not None:
                if i >= len(self._refs):
                    raise StopIteration
                self._index += 1
                return self._refs[i]
            item = ObjectRef(self._task_id + 2 + i)
            # (fetch_local: the value the caller takes next comes with its ref)
            ready, _ = current.backend.wait([item, self._end], 1, timeout, True)
            if not ready:
                raise GetTimeoutError(f"No item of the generator came within {timeout} s.")
            if ready[0] is item:
                self._index += 1
                if self._backpressure:
                    self._acks.append(put_at(current.client, self._task_id + ACK + i, None))
                return item
            self._read_end()

    def _read_end(self) -> None:
        try:
            end = current.backend.get([self._end], None)[0]
        except Exception:
            # What ended the task comes next (its get raises it); the refs taken before
            # are not read again.
            self._refs = [self._end] * (self._index + 1)
            return
        self._refs = list(end.refs)

    def __del__(self) -> None:
        if self._backpressure and self._refs is None and current.client is not None:
            # The worker may be waiting for an item to be taken that never will be.
            try:
                current.client.cancel(self._end.id, False)
            except Exception:
                pass

    def __repr__(self) -> str:
        return f"ObjectRefGenerator({self._end.hex()})"


def wait_items(items: list[Any], num_returns: int, timeout: float | None,
               fetch_local: bool) -> tuple[list[Any], list[Any]]:
    """``wait`` over refs and generators (a generator is ready when its next ref is)."""
    for item in items:
        if not isinstance(item, (ObjectRef, ObjectRefGenerator)):
            raise TypeError("wait() takes ObjectRefs and ObjectRefGenerators; got an item of "
                            f"type {type(item).__name__}.")
    if len({id(i) for i in items}) != len(items):
        raise ValueError("wait() got the same item more than once.")
    if not isinstance(num_returns, int) or not 0 <= num_returns <= len(items):
        raise ValueError(f"num_returns must be an int from 0 to {len(items)}, not "
                         f"{num_returns!r}.")
    if any(isinstance(i, ObjectRefGenerator) and i._native() is not None for i in items):
        return current.backend.wait(items, num_returns, timeout, fetch_local)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        probes = [(n, ref) for n, item in enumerate(items)
                  for ref in (item._probe() if isinstance(item, ObjectRefGenerator) else [item])]
        refs = [ref for _, ref in probes]
        got, _ = current.backend.wait(refs, len(refs), 0, fetch_local)
        done = set(got)
        ready = {n for n, ref in probes if ref in done}
        left = None if deadline is None else deadline - time.monotonic()
        if len(ready) >= num_returns or (left is not None and left <= 0):
            break
        current.backend.wait(refs, len(done) + 1, left, fetch_local)
    first = sorted(ready)[:num_returns]
    return ([items[n] for n in first], [item for n, item in enumerate(items) if n not in first])


def put_at(client: Any, oid: int, value: Any) -> ObjectRef:
    """Store ``value`` at the node under ``oid`` (an id the caller chose), held by this
    process through the returned ref."""
    parts, size, contained = serialization.dumps(value)
    if size <= client.inline_max:
        msgs: list[Any] = [(P.PUT, oid, serialization.join(parts), 0, contained, -1)]
    else:
        offset = client.write_object(oid, parts, size)
        msgs = [(P.PUT, oid, None, size, contained, offset)]
        if offset >= 0:  # the writer's lease on the range: it does not read it back
            msgs.append((P.UNPIN, [offset]))
    ref = ObjectRef(oid, False)  # the PUT counts as this process's hold
    client.send(msgs)
    return ref


def put_error_at(client: Any, oid: int, blob: bytes) -> ObjectRef:
    ref = ObjectRef(oid, False)
    client.send([(P.PUT, oid, blob, 0, (), -1)])
    return ref


# ----------------------------------------------------------------------------- worker side


class _Stream:
    """One streaming call running in a worker."""

    def __init__(self, client: Any, spec: tuple, marker: StreamMarker,
                 error_blob: Any) -> None:
        self.client = client
        self.task_id = spec[P.S_TASK_ID]
        self.name = spec[P.S_NAME]
        self.backpressure = marker.backpressure
        node = client.client_no >> NODE_SHIFT
        self.here = self.task_id >> P.OWNER_SHIFT == node
        self.error_blob = error_blob
        self.refs: list[ObjectRef] = []
        self.skip = 0  # values of a retried run that take the place of stored items

    def wait_turn(self) -> None:
        n = len(self.refs)
        if self.here and self.backpressure and n >= self.backpressure:
            ack = ObjectRef(self.task_id + ACK + n - self.backpressure)
            current.backend.get([ack], None)

    def store(self, value: Any) -> None:
        if self.skip:
            self.skip -= 1
            return
        n = len(self.refs)
        if n >= MAX_ITEMS:
            raise RuntimeError(f"A streaming generator may yield at most {MAX_ITEMS} values.")
        if self.here:
            self.refs.append(put_at(self.client, self.task_id + 2 + n, value))
        else:
            self.refs.append(self.client.put(value))

    def failed(self, exc: Exception) -> None:
        blob = self.error_blob(exc)
        n = len(self.refs)
        if self.here:
            self.refs.append(put_error_at(self.client, self.task_id + 2 + n, blob))
        else:
            self.refs.append(put_error_at(self.client, self.client.ids.next(), blob))


def run(client: Any, spec: tuple, fn: Any, args: list[Any], kwargs: dict[str, Any],
        error_blob: Any) -> Any:
    """Run a generator call (``args[0]`` is its marker) in this thread."""
    import asyncio  # here, not at the top: most processes never stream

    extra = spec[P.S_EXTRA]
    if extra and extra.get("rebuild"):
        # (The refs, as the task's ignored value, hold the values until its result is sent.)
        return _rebuild(client, fn(*args[1:], **kwargs), extra["rebuild"], error_blob)
    if type(args[0]) is DynamicMarker:
        gen = _generator_of(fn(*args[1:], **kwargs))
        if hasattr(gen, "__anext__"):
            return asyncio.run(_dynamic_async(client, spec, gen, error_blob))
        return _dynamic(client, spec, gen, error_blob)
    stream = _Stream(client, spec, args[0], error_blob)
    retries = args[0].retries
    while True:
        try:
            gen = fn(*args[1:], **kwargs)
            if hasattr(gen, "__anext__"):
                asyncio.run(_drive_async(stream, gen))
            else:
                _drive_sync(stream, gen)
        except Exception as exc:
            if retries != 0 and retryable(spec, exc):
                # As Ray: run it again here; the items stored stay, and the values the
                # new run yields in their places are dropped.
                retries -= 1
                stream.skip = len(stream.refs)
                print(f"The generator raised {exc!r}; retry_exceptions allows a retry: "
                      "running it again.", file=sys.stderr)
                continue
            stream.failed(exc)
        return StreamEnd(stream.refs)


async def run_async(client: Any, spec: tuple, fn: Any, args: list[Any],
                    kwargs: dict[str, Any], error_blob: Any) -> Any:
    """Run a generator call of an async actor on its event loop."""
    import asyncio
    loop = asyncio.get_running_loop()
    gen = None
    if type(args[0]) is DynamicMarker:
        gen = _generator_of(fn(*args[1:], **kwargs))
        if hasattr(gen, "__anext__"):
            return await _dynamic_async(client, spec, gen, error_blob)
        return _dynamic(client, spec, gen, error_blob)
    stream = _Stream(client, spec, args[0], error_blob)
    try:
        gen = fn(*args[1:], **kwargs)
        if hasattr(gen, "__anext__"):
            await _drive_async(stream, gen)
        else:
            await loop.run_in_executor(None, _drive_sync, stream, gen)
    except Exception as exc:
        stream.failed(exc)
    return StreamEnd(stream.refs)


def _rebuild(client: Any, gen: Any, ids: list[int | None], error_blob: Any
             ) -> list[ObjectRef]:
    """Store the values of ``gen`` (a generator's rerun) under ``ids``, by index (None: that
    value is not needed); if it raises, its error goes where the next value would. Returns
    the refs of what it stored."""
    import asyncio

    refs: list[ObjectRef] = []  # (held until every value is stored)
    done = [0]

    def store(value: Any) -> bool:
        i = done[0]
        oid = ids[i] if i < len(ids) else None
        if oid:
            refs.append(put_at(client, oid, value))
        done[0] = i + 1
        return done[0] < len(ids)

    async def drive_async() -> None:
        async for value in gen:
            if not store(value):
                break

    try:
        if hasattr(gen, "__anext__"):
            asyncio.run(drive_async())
        else:
            for value in _generator_of(gen):
                if not store(value):
                    break
    except Exception as exc:
        oid = ids[done[0]] if done[0] < len(ids) else None
        if oid:
            refs.append(put_error_at(client, oid, error_blob(exc)))
    return refs


def _generator_of(value: Any) -> Any:
    """``value`` if it is a generator; a ``num_returns="dynamic"`` task that returns anything
    else fails, as in Ray (its values would otherwise be taken apart one by one)."""
    if inspect.isgenerator(value) or inspect.isasyncgen(value):
        return value
    raise ValueError(f'A task with num_returns="dynamic" must return a generator, not a '
                     f"{type(value).__name__}: make it a generator function (use yield).")


def retryable(spec: tuple, exc: Exception) -> bool:
    """Whether the task's ``retry_exceptions`` covers ``exc`` (True, or one of the names of
    the exception types it lists is in ``exc``'s MRO)."""
    policy = spec[P.S_RETRY_EXC]
    if policy is True:
        return True
    return bool(policy) and any(t.__name__ in policy for t in type(exc).__mro__)


def _dynamic(client: Any, spec: tuple, gen: Any, error_blob: Any) -> DynamicObjectRefGenerator:
    """A ref per value ``gen`` yields; if it raises, its error is one more ref, the last, so
    the values before it stay readable (as in Ray). An error ``retry_exceptions`` covers
    fails the whole task instead, so that it runs again (its values so far are dropped)."""
    refs = []
    try:
        for value in gen:
            refs.append(client.put(value))
    except Exception as exc:
        if retryable(spec, exc):
            raise
        refs.append(put_error_at(client, client.ids.next(), error_blob(exc)))
    return DynamicObjectRefGenerator(refs)


async def _dynamic_async(client: Any, spec: tuple, gen: Any,
                         error_blob: Any) -> DynamicObjectRefGenerator:
    refs = []
    try:
        async for value in gen:
            refs.append(client.put(value))
    except Exception as exc:
        if retryable(spec, exc):
            raise
        refs.append(put_error_at(client, client.ids.next(), error_blob(exc)))
    return DynamicObjectRefGenerator(refs)


def static_returns(value: Any, nret: int, error_blob: Any) -> tuple[list[Any], bytes | None]:
    """The values of a task declared with ``num_returns=nret`` (> 1, or 1 for a generator),
    and the error its other returns hold, as in Ray: a generator that yields fewer than ``nret`` values keeps
    those, and the rest hold its error (or a ValueError saying how many it yielded). One that
    yields more keeps its first ``nret``: the extra value is not taken, and an error is printed
    to the task's output. An error raised after all ``nret`` values is printed and ignored."""
    if not inspect.isgenerator(value):
        return list(value), None
    values: list[Any] = []
    try:
        for item in value:
            if len(values) == nret:
                value.close()
                print(f"The generator yielded more than num_returns={nret} values; the first "
                      f"{nret} are its returns, the rest are ignored.", file=sys.stderr)
                break
            values.append(item)
    except Exception as exc:
        if len(values) < nret:
            return values, error_blob(exc)
        print(f"The generator raised {exc!r} after yielding all its {nret} returns; "
              "the error is ignored.", file=sys.stderr)
    if len(values) < nret:
        return values, error_blob(ValueError(
            f"The generator yielded {len(values)} values, but num_returns={nret}."))
    return values, None


def _drive_sync(stream: _Stream, gen: Any) -> None:
    for value in gen:
        stream.store(value)
        stream.wait_turn()


async def _drive_async(stream: _Stream, gen: Any) -> None:
    import asyncio
    loop = asyncio.get_running_loop()
    async for value in gen:
        stream.store(value)
        if stream.backpressure:
            await loop.run_in_executor(None, stream.wait_turn)


class DynamicMarker:
    """The first argument of a ``num_returns="dynamic"`` call."""

    __slots__ = ()

    def __reduce__(self) -> Any:
        return (DynamicMarker, ())


MARKERS = (StreamMarker, DynamicMarker)

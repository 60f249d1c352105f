"""Pool: ``multiprocessing.Pool``'s API with actors as the processes (Ray's
``ray.util.multiprocessing.Pool``).

    caller ── chunks of (args, kwargs) ──▶ pool actor (slot i) ── list of outcomes ──▶ ref

Work is cut into chunks (``chunksize`` items, the stdlib's default sizes); each chunk is one
call ``_PoolProcess.run(func, chunk)`` on a pool actor, and ``func`` is put in the object store
once per map, not once per chunk. An actor runs every item of its chunk and returns one outcome
per item: the value, or a `PoolTaskError` holding the exception, so one failing item does not
hide the others' results.

- ``map``/``starmap``/``apply`` (and their ``_async`` forms) submit every chunk at once, round
  robin. Their `AsyncResult` waits on the chunk refs in a daemon thread (the stdlib's result
  handler): at the first failing item to arrive it calls ``error_callback(exc)`` once; when
  every chunk is in, it calls ``callback(result)`` (the whole list for a map) if nothing failed,
  and only then is the result ready. ``get`` raises the first failing item's exception, of the
  user's own type.
- ``imap``/``imap_unordered`` read the iterable lazily and keep one chunk per actor in flight:
  each chunk that comes back frees its actor for the next chunk. As in Ray, a failing item
  comes out of the iterator as its `PoolTaskError` (``.underlying`` is the exception) in its
  place; the items around it are not lost.

Pool state (the actors, their call counts for ``maxtasksperchild``, the refs of unfinished work
and the live imap iterators for ``join``) belongs to the thread that uses the pool.

Actors hold no CPU (as Ray's pool actors), so a pool never blocks tasks; ``processes`` may not
exceed the cluster's CPUs, and defaults to them. Without a running cluster, the pool starts one
with ``processes`` CPUs (or attaches to ``ray_address``), as Ray's does.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from multiprocessing import TimeoutError
from typing import Any

import nbdist

log = logging.getLogger(__name__)

Chunk = list[tuple[tuple[Any, ...], dict[str, Any]]]
# The pool looks for finished work among its refs once it holds this many (then twice as many).
_TRIM_AT = 256


class PoolTaskError(Exception):
    """One item's exception (``underlying``), carried back in its chunk's outcomes; what an
    imap iterator yields in place of a failed item, as Ray's does."""

    def __init__(self, underlying: BaseException) -> None:
        super().__init__(underlying)
        self.underlying = underlying


class _PoolProcess:
    def __init__(self, initializer: Callable[..., Any] | None, initargs: Iterable[Any]) -> None:
        if initializer is not None:
            initializer(*initargs)

    def ping(self) -> None:
        return None

    def run(self, func: Callable[..., Any], chunk: Chunk) -> list[Any]:
        out: list[Any] = []
        for args, kwargs in chunk:
            try:
                out.append(func(*args, **kwargs))
            except Exception as exc:
                out.append(PoolTaskError(exc))
        return out


_PoolProcessClass = nbdist.remote(num_cpus=0)(_PoolProcess)


def _first_failure(outcomes: Iterable[Any]) -> BaseException | None:
    """The user's exception of the first failed item among ``outcomes``, if any."""
    for value in outcomes:
        if isinstance(value, PoolTaskError):
            return value.underlying
    return None


def _fetch(ref: Any, size: int) -> list[Any]:
    """A chunk's outcomes; a chunk whose actor was lost fails each of its items."""
    try:
        return list(nbdist.get(ref))
    except Exception as exc:
        return [PoolTaskError(exc)] * size


def _call(hook: Callable[[Any], Any], value: Any) -> None:
    try:
        hook(value)
    except Exception:  # the stdlib's handler thread would die; ours logs and goes on
        log.exception("nbdist.util.multiprocessing: a pool callback raised")


class AsyncResult:
    """The result of ``apply_async`` / ``map_async`` / ``starmap_async``."""

    def __init__(self, refs: list[Any], sizes: list[int], single: bool,
                 callback: Callable[[Any], Any] | None,
                 error_callback: Callable[[BaseException], Any] | None) -> None:
        self._single = single
        self._done = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._collect,
                                        args=(refs, sizes, callback, error_callback),
                                        name="nbdist-pool-result", daemon=True)
        self._thread.start()

    def _collect(self, refs: list[Any], sizes: list[int],
                 callback: Callable[[Any], Any] | None,
                 error_callback: Callable[[BaseException], Any] | None) -> None:
        try:
            chunks: dict[Any, list[Any]] = {}
            pending, size_of = list(refs), dict(zip(refs, sizes, strict=True))
            while pending:  # in completion order: error_callback at the first failure seen
                ready, pending = nbdist.wait(pending, num_returns=1)
                chunks[ready[0]] = _fetch(ready[0], size_of[ready[0]])
                failed = _first_failure(chunks[ready[0]])
                if failed is not None and self._error is None:
                    self._error = failed
                    if error_callback is not None:
                        _call(error_callback, failed)
            outcomes = list(itertools.chain.from_iterable(chunks[r] for r in refs))
            if self._error is None:
                self._value = outcomes[0] if self._single else outcomes
                if callback is not None:
                    _call(callback, self._value)
            else:  # get() raises the first failure in the items' order, as Ray's
                self._error = _first_failure(outcomes)
        finally:
            self._done.set()

    def wait(self, timeout: float | None = None) -> None:
        """Return when the result is ready or after ``timeout`` seconds."""
        self._done.wait(timeout)

    def get(self, timeout: float | None = None) -> Any:
        """The result; raises the call's exception, or TimeoutError if not ready in time."""
        if not self._done.wait(timeout):
            raise TimeoutError
        if self._error is not None:
            raise self._error
        return self._value

    def ready(self) -> bool:
        """Whether the work is done (and its callback has run)."""
        return self._done.is_set()

    def successful(self) -> bool:
        """Whether the call raised no exception; ValueError while it is not ready."""
        if not self.ready():
            raise ValueError(f"{self!r} not ready")
        return self._error is None


class IMapIterator:
    """The iterator of ``imap`` (in order) and ``imap_unordered`` (as chunks finish).

    ``_inflight`` maps a chunk's ref to (chunk index, actor slot, item count); ``_done`` holds
    the outcomes of chunks that came back and were not yet yielded, by chunk index."""

    def __init__(self, pool: Pool, func: Callable[..., Any], chunks: Iterator[Chunk],
                 ordered: bool) -> None:
        self._pool = pool
        self._func_ref = nbdist.put(func)
        self._chunks = chunks
        self._ordered = ordered
        self._inflight: dict[Any, tuple[int, int, int]] = {}
        self._done: dict[int, list[Any]] = {}
        self._submitted = 0
        self._next_chunk = 0
        self._buffer: deque[Any] = deque()
        for slot in range(len(pool._actors)):
            self._submit(slot)

    def _submit(self, slot: int) -> bool:
        """Send the next chunk to the actor of ``slot``; False when none is left."""
        chunk = next(self._chunks, None)
        if chunk is None:
            return False
        ref = self._pool._submit(slot, self._func_ref, chunk)
        self._inflight[ref] = (self._submitted, slot, len(chunk))
        self._submitted += 1
        return True

    def _submit_rest(self) -> None:
        """Submit every chunk not yet sent (the pool is joining: no actor takes more later)."""
        for slot in itertools.cycle(range(len(self._pool._actors))):
            if not self._submit(slot):
                return

    def __iter__(self) -> IMapIterator:
        return self

    def __next__(self) -> Any:
        return self.next()

    def next(self, timeout: float | None = None) -> Any:
        """The next result (a failed item's is its `PoolTaskError`); TimeoutError if none is
        ready within ``timeout`` seconds; StopIteration after the last."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._buffer:
            index = self._next_chunk if self._ordered else next(iter(self._done), None)
            if index in self._done:
                self._buffer.extend(self._done.pop(index))
                self._next_chunk += 1
            elif not self._inflight:
                raise StopIteration
            else:
                self._take_one(deadline)
        return self._buffer.popleft()

    def _take_one(self, deadline: float | None) -> None:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _ = nbdist.wait(list(self._inflight), num_returns=1, timeout=left)
        if not ready:
            raise TimeoutError
        index, slot, size = self._inflight.pop(ready[0])
        self._done[index] = _fetch(ready[0], size)
        self._submit(slot)


def _start_cluster(processes: int | None, ray_address: str | None) -> None:
    if nbdist.is_initialized():
        return
    if ray_address is not None and ray_address != "local":
        nbdist.init(address=ray_address)
    else:
        nbdist.init(num_cpus=processes)


class Pool:
    """A pool of ``processes`` actors with the stdlib pool's methods.

    ``initializer(*initargs)`` runs in each actor when it starts; an actor is replaced after
    ``maxtasksperchild`` chunks; ``context`` is accepted and ignored; ``ray_remote_args`` are
    the actors' options (resources, ...)."""

    def __init__(self, processes: int | None = None,
                 initializer: Callable[..., Any] | None = None,
                 initargs: Iterable[Any] | None = None, maxtasksperchild: int | None = None,
                 context: Any = None, ray_address: str | None = None,
                 ray_remote_args: dict[str, Any] | None = None) -> None:
        _start_cluster(processes, ray_address)
        cpus = int(nbdist.cluster_resources().get("CPU", 0))
        if processes is None:
            processes = cpus
        if processes <= 0:
            raise ValueError("Processes in the pool must be >0.")
        if processes > cpus:
            raise ValueError(f"Tried to start a pool with {processes} processes on a cluster "
                             f"with only {cpus} CPUs.")
        self._initializer = initializer
        self._initargs = tuple(initargs or ())
        self._maxtasks = maxtasksperchild or 0
        self._actor_class = _PoolProcessClass.options(**(ray_remote_args or {}))
        self._actors: list[list[Any]] = [[self._new_actor(), 0] for _ in range(processes)]
        self._turn = itertools.cycle(range(processes))
        self._unfinished: list[Any] = []
        self._trim_at = _TRIM_AT
        self._results: list[AsyncResult] = []  # not yet ready: join waits for them
        self._iterators: weakref.WeakSet[IMapIterator] = weakref.WeakSet()
        self._closed = False
        nbdist.get([actor.ping.remote() for actor, _ in self._actors])

    def _new_actor(self) -> Any:
        return self._actor_class.remote(self._initializer, self._initargs)

    def __len__(self) -> int:
        return len(self._actors)

    def _check_running(self) -> None:
        if self._closed:
            raise ValueError("Pool not running")

    def _submit(self, slot_index: int, func_ref: Any, chunk: Chunk) -> Any:
        """Run ``chunk`` on the actor of slot ``slot_index``; the ref of its outcomes."""
        slot = self._actors[slot_index]
        ref = slot[0].run.remote(func_ref, chunk)
        slot[1] += 1
        if self._maxtasks and slot[1] >= self._maxtasks:
            # The old actor ends once its calls are done and its handle is gone.
            slot[0], slot[1] = self._new_actor(), 0
        self._unfinished.append(ref)
        if len(self._unfinished) >= self._trim_at:
            # Forget finished work, so a long-lived pool holds no refs.
            _, self._unfinished = nbdist.wait(self._unfinished,
                                              num_returns=len(self._unfinished), timeout=0)
            self._trim_at = max(_TRIM_AT, 2 * len(self._unfinished))
        return ref

    def _run_async(self, func: Callable[..., Any], chunks: Iterable[Chunk], single: bool,
                   callback: Callable[[Any], Any] | None,
                   error_callback: Callable[[BaseException], Any] | None) -> AsyncResult:
        """Submit each chunk to the next actor in turn; the result of them all."""
        self._check_running()
        func_ref = nbdist.put(func)
        refs, sizes = [], []
        for chunk in chunks:
            refs.append(self._submit(next(self._turn), func_ref, chunk))
            sizes.append(len(chunk))
        result = AsyncResult(refs, sizes, single, callback, error_callback)
        self._results = [r for r in self._results if not r.ready()]
        self._results.append(result)
        return result

    def _map_chunks(self, iterable: Iterable[Any], chunksize: int | None, star: bool
                    ) -> list[Chunk]:
        self._check_running()
        items = list(iterable)
        if chunksize is None:
            chunksize, extra = divmod(len(items), len(self._actors) * 4)
            chunksize = max(1, chunksize + bool(extra))
        return list(_chunked(iter(items), chunksize, star))

    def apply(self, func: Callable[..., Any], args: Iterable[Any] | None = (),
              kwds: dict[str, Any] | None = None, *,
              kwargs: dict[str, Any] | None = None) -> Any:
        """``func(*args, **kwds)`` in a pool actor; waits for the result (``kwargs`` is Ray's
        name for ``kwds``)."""
        return self.apply_async(func, args, kwds, kwargs=kwargs).get()

    def apply_async(self, func: Callable[..., Any], args: Iterable[Any] | None = (),
                    kwds: dict[str, Any] | None = None,
                    callback: Callable[[Any], Any] | None = None,
                    error_callback: Callable[[BaseException], Any] | None = None, *,
                    kwargs: dict[str, Any] | None = None) -> AsyncResult:
        """``func(*args, **kwds)`` in a pool actor; ``callback(value)`` or
        ``error_callback(exception)`` runs once, in a thread of the pool, before it is ready."""
        chunk = [(tuple(args or ()), dict(kwds or kwargs or {}))]
        return self._run_async(func, [chunk], True, callback, error_callback)

    def map(self, func: Callable[[Any], Any], iterable: Iterable[Any],
            chunksize: int | None = None) -> list[Any]:
        """``[func(x) for x in iterable]``, computed by the pool; raises the first failure."""
        return self.map_async(func, iterable, chunksize).get()

    def map_async(self, func: Callable[[Any], Any], iterable: Iterable[Any],
                  chunksize: int | None = None, callback: Callable[[Any], Any] | None = None,
                  error_callback: Callable[[BaseException], Any] | None = None
                  ) -> AsyncResult:
        """`map` without waiting; ``callback`` gets the whole list, ``error_callback`` the
        first exception to arrive."""
        chunks = self._map_chunks(iterable, chunksize, False)
        return self._run_async(func, chunks, False, callback, error_callback)

    def starmap(self, func: Callable[..., Any], iterable: Iterable[Iterable[Any]],
                chunksize: int | None = None) -> list[Any]:
        """``[func(*args) for args in iterable]``, computed by the pool."""
        return self.starmap_async(func, iterable, chunksize).get()

    def starmap_async(self, func: Callable[..., Any], iterable: Iterable[Iterable[Any]],
                      chunksize: int | None = None,
                      callback: Callable[[Any], Any] | None = None,
                      error_callback: Callable[[BaseException], Any] | None = None
                      ) -> AsyncResult:
        chunks = self._map_chunks(iterable, chunksize, True)
        return self._run_async(func, chunks, False, callback, error_callback)

    def imap(self, func: Callable[[Any], Any], iterable: Iterable[Any],
             chunksize: int | None = 1) -> IMapIterator:
        """An iterator of ``func(x)`` in the order of ``iterable``."""
        return self._imap(func, iterable, chunksize, ordered=True)

    def imap_unordered(self, func: Callable[[Any], Any], iterable: Iterable[Any],
                       chunksize: int | None = 1) -> IMapIterator:
        """An iterator of ``func(x)`` in the order they finish (chunk by chunk)."""
        return self._imap(func, iterable, chunksize, ordered=False)

    def _imap(self, func: Callable[[Any], Any], iterable: Iterable[Any],
              chunksize: int | None, ordered: bool) -> IMapIterator:
        self._check_running()
        if chunksize is not None and chunksize < 1:
            raise ValueError(f"Chunksize must be 1+, not {chunksize}")
        chunks = _chunked(iter(iterable), chunksize or 1, False)
        iterator = IMapIterator(self, func, chunks, ordered)
        self._iterators.add(iterator)
        return iterator

    def close(self) -> None:
        """Accept no more work; what was submitted still runs (see `join`)."""
        self._closed = True

    def terminate(self) -> None:
        """Stop the pool's actors now; unfinished work fails (ActorDiedError)."""
        self._closed = True
        for actor, _ in self._actors:
            nbdist.kill(actor)
        self._unfinished = []

    def join(self) -> None:
        """Wait for the submitted work of a closed pool to end, then stop its actors."""
        if not self._closed:
            raise ValueError("Pool is still running")
        for iterator in list(self._iterators):
            iterator._submit_rest()
        self._iterators = weakref.WeakSet()
        if self._unfinished:
            nbdist.wait(self._unfinished, num_returns=len(self._unfinished))
        self._unfinished = []
        # As with the stdlib's pool, every result is ready once join returns.
        for result in self._results:
            result.wait()
        self._results = []
        self._actors = []

    def __enter__(self) -> Pool:
        self._check_running()
        return self

    def __exit__(self, *exc: object) -> None:
        self.terminate()


def _chunked(items: Iterator[Any], chunksize: int, star: bool) -> Iterator[Chunk]:
    if chunksize < 1:
        raise ValueError(f"Chunksize must be 1+, not {chunksize}")
    while True:
        part = list(itertools.islice(items, chunksize))
        if not part:
            return
        yield [(tuple(a), {}) if star else ((a,), {}) for a in part]

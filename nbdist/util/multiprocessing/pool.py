"""Pool: ``multiprocessing.Pool``'s API with actors as the processes (Ray's
``ray.util.multiprocessing.Pool``).

    caller ── chunks of (args, kwargs) ──▶ pool actor i (round robin) ── list of outcomes ──▶ ref

Work is cut into chunks (``chunksize`` items, the stdlib's default sizes); each chunk is one
call ``_PoolProcess.run(func, chunk)`` on the next actor in turn, and ``func`` is put in the
object store once per map, not once per chunk. An actor runs every item of its chunk and
returns one outcome per item: the value, or `_Failed` holding the exception, so one failing
item does not hide the others' results. The caller raises the first failure's exception, of
the user's own type, as the stdlib pool does.

`AsyncResult` waits on its chunk refs in a daemon thread that then runs the callbacks (as the
stdlib's result-handler thread does); `IMapIterator` waits on the refs itself, in order or
first-ready. Pool state (the actors, their call counts for ``maxtasksperchild``, the refs of
unfinished work for ``join``) belongs to the thread that uses the pool.

Actors hold no CPU (as Ray's pool actors), so a pool never blocks tasks; ``processes`` may not
exceed the cluster's CPUs, and defaults to them. Without a running cluster, the pool starts one
with ``processes`` CPUs (or attaches to ``ray_address``), as Ray's does.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable, Iterator
from multiprocessing import TimeoutError
from typing import Any

import nbdist

Chunk = list[tuple[tuple[Any, ...], dict[str, Any]]]


class _Failed:
    """One item's exception, carried back inside a chunk's outcomes."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


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
                out.append(_Failed(exc))
        return out


_PoolProcessClass = nbdist.remote(num_cpus=0)(_PoolProcess)


def _first_failure(outcomes: Iterable[Any]) -> BaseException | None:
    for value in outcomes:
        if isinstance(value, _Failed):
            return value.exc
    return None


class AsyncResult:
    """The result of ``apply_async`` / ``map_async`` / ``starmap_async``."""

    def __init__(self, refs: list[Any], single: bool, callback: Callable[[Any], Any] | None,
                 error_callback: Callable[[BaseException], Any] | None) -> None:
        self._refs = refs
        self._single = single
        self._done = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._collect, args=(callback, error_callback),
                                        name="nbdist-pool-result", daemon=True)
        self._thread.start()

    def _collect(self, callback: Callable[[Any], Any] | None,
                 error_callback: Callable[[BaseException], Any] | None) -> None:
        try:
            outcomes = list(itertools.chain.from_iterable(nbdist.get(self._refs)))
            self._error = _first_failure(outcomes)
            if self._error is None:
                self._value = outcomes[0] if self._single else outcomes
        except BaseException as exc:  # a lost actor fails the whole result
            self._error = exc
        self._refs = []
        self._done.set()
        if self._error is None and callback is not None:
            callback(self._value)
        elif self._error is not None and error_callback is not None:
            error_callback(self._error)

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
        return self._done.is_set()

    def successful(self) -> bool:
        """Whether the call raised no exception; ValueError while it is not ready."""
        if not self.ready():
            raise ValueError(f"{self!r} not ready")
        return self._error is None


class IMapIterator:
    """The iterator of ``imap`` (in order) and ``imap_unordered`` (as chunks finish)."""

    def __init__(self, refs: list[Any], ordered: bool) -> None:
        self._refs = list(refs)
        self._ordered = ordered
        self._buffer: list[Any] = []

    def __iter__(self) -> IMapIterator:
        return self

    def __next__(self) -> Any:
        return self.next()

    def next(self, timeout: float | None = None) -> Any:
        """The next result; TimeoutError if none is ready within ``timeout`` seconds."""
        while not self._buffer:
            if not self._refs:
                raise StopIteration
            candidates = self._refs[:1] if self._ordered else self._refs
            ready, _ = nbdist.wait(candidates, num_returns=1, timeout=timeout)
            if not ready:
                raise TimeoutError
            self._refs.remove(ready[0])
            self._buffer = list(nbdist.get(ready[0]))
        value = self._buffer.pop(0)
        if isinstance(value, _Failed):
            raise value.exc
        return value


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
        self._results: list[AsyncResult] = []  # not yet ready: join waits for them
        self._closed = False
        nbdist.get([actor.ping.remote() for actor, _ in self._actors])

    def _new_actor(self) -> Any:
        return self._actor_class.remote(self._initializer, self._initargs)

    def __len__(self) -> int:
        return len(self._actors)

    def _check_running(self) -> None:
        if self._closed:
            raise ValueError("Pool not running")

    def _run(self, func: Callable[..., Any], chunks: Iterable[Chunk]) -> list[Any]:
        """Submit each chunk to the next actor; the refs of their outcome lists."""
        self._check_running()
        func_ref = nbdist.put(func)
        refs = []
        for chunk in chunks:
            slot = self._actors[next(self._turn)]
            refs.append(slot[0].run.remote(func_ref, chunk))
            slot[1] += 1
            if self._maxtasks and slot[1] >= self._maxtasks:
                # The old actor ends once its calls are done and its handle is gone.
                slot[0], slot[1] = self._new_actor(), 0
        if self._unfinished:  # forget finished work, so a long-lived pool holds no refs
            _, self._unfinished = nbdist.wait(self._unfinished,
                                              num_returns=len(self._unfinished), timeout=0)
        self._unfinished.extend(refs)
        return refs

    def _chunks(self, iterable: Iterable[Any], chunksize: int | None, star: bool,
                default_small: bool) -> Iterator[Chunk]:
        items = list(iterable)
        if chunksize is None:
            if default_small:
                chunksize = 1
            else:
                chunksize, extra = divmod(len(items), len(self._actors) * 4)
                chunksize += bool(extra)
        if chunksize < 1:
            raise ValueError(f"Chunksize must be 1+, not {chunksize}")
        for start in range(0, len(items), chunksize):
            part = items[start:start + chunksize]
            yield [(tuple(a), {}) if star else ((a,), {}) for a in part]

    def apply(self, func: Callable[..., Any], args: Iterable[Any] = (),
              kwds: dict[str, Any] | None = None) -> Any:
        """``func(*args, **kwds)`` in a pool actor; waits for the result."""
        return self.apply_async(func, args, kwds).get()

    def apply_async(self, func: Callable[..., Any], args: Iterable[Any] = (),
                    kwds: dict[str, Any] | None = None,
                    callback: Callable[[Any], Any] | None = None,
                    error_callback: Callable[[BaseException], Any] | None = None
                    ) -> AsyncResult:
        refs = self._run(func, [[(tuple(args), dict(kwds or {}))]])
        return self._result(AsyncResult(refs, True, callback, error_callback))

    def map(self, func: Callable[[Any], Any], iterable: Iterable[Any],
            chunksize: int | None = None) -> list[Any]:
        """``[func(x) for x in iterable]``, computed by the pool; raises the first failure."""
        return self.map_async(func, iterable, chunksize).get()

    def map_async(self, func: Callable[[Any], Any], iterable: Iterable[Any],
                  chunksize: int | None = None, callback: Callable[[Any], Any] | None = None,
                  error_callback: Callable[[BaseException], Any] | None = None
                  ) -> AsyncResult:
        refs = self._run(func, self._chunks(iterable, chunksize, False, False))
        return self._result(AsyncResult(refs, False, callback, error_callback))

    def starmap(self, func: Callable[..., Any], iterable: Iterable[Iterable[Any]],
                chunksize: int | None = None) -> list[Any]:
        """``[func(*args) for args in iterable]``, computed by the pool."""
        return self.starmap_async(func, iterable, chunksize).get()

    def starmap_async(self, func: Callable[..., Any], iterable: Iterable[Iterable[Any]],
                      chunksize: int | None = None,
                      callback: Callable[[Any], Any] | None = None,
                      error_callback: Callable[[BaseException], Any] | None = None
                      ) -> AsyncResult:
        refs = self._run(func, self._chunks(iterable, chunksize, True, False))
        return self._result(AsyncResult(refs, False, callback, error_callback))

    def imap(self, func: Callable[[Any], Any], iterable: Iterable[Any],
             chunksize: int | None = 1) -> IMapIterator:
        """An iterator of ``func(x)`` in the order of ``iterable``."""
        return IMapIterator(self._run(func, self._chunks(iterable, chunksize, False, True)),
                            ordered=True)

    def imap_unordered(self, func: Callable[[Any], Any], iterable: Iterable[Any],
                       chunksize: int | None = 1) -> IMapIterator:
        """An iterator of ``func(x)`` in the order they finish (chunk by chunk)."""
        return IMapIterator(self._run(func, self._chunks(iterable, chunksize, False, True)),
                            ordered=False)

    def _result(self, result: AsyncResult) -> AsyncResult:
        self._results = [r for r in self._results if not r.ready()]
        self._results.append(result)
        return result

    def close(self) -> None:
        """Accept no more work; what was submitted still runs (see `join`)."""
        self._closed = True

    def terminate(self) -> None:
        """Stop the pool's actors now; unfinished work is lost."""
        self._closed = True
        for actor, _ in self._actors:
            nbdist.kill(actor)
        self._unfinished = []

    def join(self) -> None:
        """Wait for the submitted work of a closed pool to end, then stop its actors."""
        if not self._closed:
            raise ValueError("Pool is still running")
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

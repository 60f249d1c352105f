"""Generator tasks and methods on Ray: Ray's own streaming generators, with nbdist's types.

A generator function or method runs as a Ray generator (``num_returns="streaming"``) whose
function wraps the user's generator (`stream`, `stream_async`): each step runs with the
call's output captured, as `worker.run_call` does for a whole call, and an exception
becomes a TaskFailure, which Ray stores as the next item (so ``get`` raises at the item where
the generator raised). What ``.remote()`` returns, a ``ray.ObjectRefGenerator``, is wrapped in
`ObjectRefGenerator` here: a subclass of nbdist's `ObjectRefGenerator` (named like it) yielding
nbdist refs, which ``wait`` and ``cancel`` hand back to Ray as the generator itself.

``num_returns="dynamic"`` runs as one Ray return whose value is nbdist's
`DynamicObjectRefGenerator` over refs the task ``ray.put``; Ray's own dynamic generators are
deprecated in favour of streaming.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from typing import Any

from nbdist.backends.ray import worker
from nbdist.backends.ray.errors import RetryableTaskFailure, translate
from nbdist.backends.ray.refs import ObjectRef as RayRef
from nbdist.driver.generators import DynamicObjectRefGenerator
from nbdist.driver.generators import ObjectRefGenerator as EngineGenerator


def _start(fn: Any, name: str, tag: str | None, args: Any, kwargs: Any,
           setup: Any) -> tuple[worker.CallInfo, Any]:
    if not worker._installed:
        setup()
    info = worker.CallInfo(name, tag, worker._sink[0], owner=getattr(fn, "__self__", None))
    token = worker.current.set(info)
    try:
        return info, fn(*args, **kwargs)
    except Exception as exc:
        raise worker.failure(name, exc, False) from None
    finally:
        worker._finish_output(info)
        worker.current.reset(token)


def stream(fn: Any, name: str, tag: str | None, args: Any, kwargs: Any,
           setup: Any, retry: Any = False) -> Iterator[Any]:
    """The user's generator, a step at a time inside the call's context; an error ``retry``
    (the task's ``retry_exceptions``) covers is raised as retryable, so Ray runs it again."""
    info, gen = _start(fn, name, tag, args, kwargs, setup)
    if hasattr(gen, "__anext__"):
        gen = _sync_steps(gen)
    while True:
        token = worker.current.set(info)
        try:
            value = next(gen)
        except StopIteration:
            return
        except Exception as exc:
            raise worker.failure(name, exc, retry) from None
        finally:
            worker._finish_output(info)
            worker.current.reset(token)
        yield value


async def stream_async(fn: Any, name: str, tag: str | None, args: Any, kwargs: Any,
                       setup: Any) -> Any:
    info, gen = _start(fn, name, tag, args, kwargs, setup)
    while True:
        token = worker.current.set(info)
        try:
            value = await gen.__anext__()
        except StopAsyncIteration:
            return
        except Exception as exc:
            raise worker.failure(name, exc, False) from None
        finally:
            worker._finish_output(info)
            worker.current.reset(token)
        yield value


def _sync_steps(agen: Any) -> Iterator[Any]:
    loop = asyncio.new_event_loop()
    try:
        while True:
            try:
                yield loop.run_until_complete(agen.__anext__())
            except StopAsyncIteration:
                return
    finally:
        loop.close()


def dynamic(fn: Any, name: str, tag: str | None, args: Any, kwargs: Any,
            setup: Any, retry: Any = False) -> DynamicObjectRefGenerator:
    """A ``num_returns="dynamic"`` call: every value put in Ray's store, the refs returned.
    If the generator raises, the values it yielded stay readable and its error is one more
    ref, the last (as nbdist's engine does): a task that only re-raises it. An error that
    ``retry`` covers fails the task instead, so that Ray runs it again."""
    import ray

    refs: list[Any] = []
    try:
        for value in stream(fn, name, tag, args, kwargs, setup, retry):
            refs.append(RayRef(ray.put(value)))
    except RetryableTaskFailure:
        raise
    except Exception as exc:
        refs.append(RayRef(ray.remote(num_cpus=0, max_retries=0)(_reraise).remote(exc)))
    return DynamicObjectRefGenerator(refs)


def _reraise(exc: BaseException) -> None:
    raise exc


def make_task_function(fn: Any, name: str, kind: str, setup: Any, retry: Any = False) -> Any:
    """The function Ray runs for a generator task (`worker.make_task_function`'s twin)."""
    if kind == "dynamic":
        def run_dynamic(*args: Any, **kwargs: Any) -> Any:
            return dynamic(fn, name, None, args, kwargs, setup, retry)

        run: Any = run_dynamic
    else:
        def run_stream(*args: Any, **kwargs: Any) -> Any:
            yield from stream(fn, name, None, args, kwargs, setup, retry)

        run = run_stream
    run.__name__ = run.__qualname__ = name
    run.__doc__ = fn.__doc__
    return run


def host_method(method: str, task_name: str, fn: Any) -> Any:
    """The host's method for the user's generator method ``method`` (a Ray generator)."""
    if inspect.isasyncgenfunction(fn):
        async def call_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            async for value in stream_async(getattr(self._nbdist_obj, method), task_name,
                                            None, args, kwargs, self._nbdist_setup):
                yield value

        call: Any = call_async
    else:
        def call_sync(self: Any, *args: Any, **kwargs: Any) -> Any:
            yield from stream(getattr(self._nbdist_obj, method), task_name, None, args,
                              kwargs, self._nbdist_setup)

        call = call_sync
    call.__name__ = call.__qualname__ = method
    return call


class ObjectRefGenerator(EngineGenerator):
    """A ``ray.ObjectRefGenerator``, yielding nbdist refs; named like the engine's (and Ray's)
    type, as `refs.ObjectRef` is."""

    def __init__(self, gen: Any) -> None:  # (not the engine's: Ray keeps the state)
        self._gen = gen

    def __next__(self) -> RayRef:
        try:
            return RayRef(next(self._gen))
        except StopIteration:
            raise
        except Exception as exc:
            raise translate(exc) from None

    async def __anext__(self) -> RayRef:
        try:
            return RayRef(await self._gen.__anext__())
        except StopAsyncIteration:
            raise
        except Exception as exc:
            raise translate(exc) from None

    def completed(self) -> RayRef:
        return RayRef(self._gen.completed())

    def is_finished(self) -> bool:
        return bool(self._gen.is_finished())

    def _native(self) -> Any:
        return self._gen

    def hex(self) -> str:
        return str(self._gen.completed().hex())

    def __del__(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"ObjectRefGenerator({self._gen.completed().hex()})"


def make_host_class(cls: type, methods: dict[str, tuple[Any, bool]], setup: Any) -> type:
    """`worker.make_host_class`, with what Ray must see on the host class itself: generator
    methods as Ray generators, each method's concurrency group, an ``async def __init__``."""
    import ray

    host = worker.make_host_class(cls, methods, setup)
    for name, fn in inspect.getmembers(cls, predicate=inspect.isfunction):
        if name not in methods or not worker.direct_method(name):
            continue
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            setattr(host, name, host_method(name, f"{cls.__name__}.{name}", fn))
        group = getattr(fn, "__nbdist_method_options__", {}).get("concurrency_group")
        if group:
            setattr(host, name, ray.method(concurrency_group=group)(getattr(host, name)))
    init = getattr(cls, "__init__", None)
    if inspect.iscoroutinefunction(init):
        name = f"{cls.__name__}.__init__"
        klass: Any = cls

        async def async_init(self: Any, nbdist_tag: str | None, *args: Any,
                             **kwargs: Any) -> None:
            obj = klass.__new__(klass)
            await worker.run_call_async(lambda *a, **k: init(obj, *a, **k), name, nbdist_tag,
                                        args, kwargs, self._nbdist_setup)
            self._nbdist_obj = obj

        host.__init__ = async_init  # type: ignore[misc]
    return host

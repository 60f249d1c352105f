"""What runs inside Ray's worker processes: the task wrapper, the actor host, captured output.

Every nbdist task runs as a Ray task whose function is `make_task_function`'s wrapper around
the user's function; every nbdist actor is a Ray actor of a subclass of `SyncHost` or
`AsyncHost` that holds the user's object and runs its methods through ``nbdist_call``. A call
carries no submitter tag (the notebook cell that caused the work): one more argument cost a
quarter of Ray's small actor calls per second. The driver knows the tag of every task it
submitted and learns those of nested tasks from their submission records, so it tags the
output records (which name their task) itself; only an actor's constructor takes the tag, once.
Where output goes for the driver (sink.py: the
driver's own server as ``(address, secret)``, or, through Ray Client, a named Ray actor) is the
same for every call of a job, so the driver puts it in Ray's internal key-value store and each
worker reads it once (`job_sink`), rather than each call carrying it: an argument Ray must
pickle cost about 100 us per call.

Around each call the wrapper:

- makes nbdist's public API run on Ray in this process (`nbdist.backends.ray.backend`), so a task
  can submit, get and wait like the driver;
- records which task runs in a `contextvars.ContextVar`, so threaded and async actors keep
  their calls apart;
- captures ``print``: ``sys.stdout``/``sys.stderr`` are replaced once per process by streams
  that turn each line written during a call into an output record for the driver; lines
  written outside a call, and anything written to file descriptor 1/2 directly (C code,
  subprocesses), go to Ray's own log files as before;
- turns an exception into a `TaskFailure` carrying an nbdist TaskError: the user's exception
  (when it pickles), the traceback without nbdist's and Ray's frames, the pid.

Records leave through `Outbox`: a flusher thread sends what accumulated to the sink every
``FLUSH_S``; a call that printed sends the rest and waits for the sink to have it before it
returns, so a task's output reaches the sink before its result reaches the caller.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from nbdist.backends.ray.errors import RetryableTaskFailure, TaskFailure
from nbdist.exceptions import TaskError
from nbdist.wire.serialization import format_user_traceback

FLUSH_S = 0.05
SINK_TIMEOUT_S = 10.0
SINK_NAMESPACE = "nbdist-internal"
_NBDIST_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class CallInfo:
    """The call running in the current context (thread or asyncio task)."""

    name: str
    tag: str | None
    sink: Any
    task_id: str = ""
    printed: bool = False
    owner: Any = None  # the actor object whose method runs, for its own __repr__
    partial: dict[str, str] = field(default_factory=dict)

    def task_hex(self) -> str:
        if not self.task_id:
            import ray

            self.task_id = ray.get_runtime_context().get_task_id() or ""
        return self.task_id


current: contextvars.ContextVar[CallInfo | None] = contextvars.ContextVar(
    "nbdist_ray_call", default=None)


def context_for_submit() -> tuple[str | None, str | None]:
    """(tag, parent task id) for a call submitted from the code running now."""
    info = current.get()
    if info is None:
        return None, None
    return info.tag, info.task_hex()


def sink_key(job_hex: str) -> str:
    return f"sink:{job_hex}"


_sink: list[Any] = []  # [the job's sink] once read


def job_sink() -> Any:
    """Where this worker's output and nested submissions go (read once per process: a worker
    serves one job); None if the driver published none."""
    if not _sink:
        import pickle

        import ray
        from ray.experimental import internal_kv

        try:
            job = ray.get_runtime_context().get_job_id()
            data = internal_kv._internal_kv_get(sink_key(job), namespace=SINK_NAMESPACE)
            _sink.append(pickle.loads(data) if data else None)
        except Exception:  # no driver sink reachable: output stays in Ray's worker logs
            _sink.append(None)
    return _sink[0]


# ----------------------------------------------------------------------------- output


class Outbox:
    """Records waiting to be sent to their sink; one per worker process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._items: list[tuple[Any, tuple]] = []
        self._wake = threading.Event()
        self._sinks: dict[Any, Any] = {}
        self._thread: threading.Thread | None = None

    def add(self, sink: Any, record: tuple) -> None:
        with self._lock:
            self._items.append((sink, record))
            self._wake.set()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="nbdist-ray-outbox",
                                                daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            time.sleep(FLUSH_S)  # let a burst of lines gather into one message
            self._wake.clear()
            self.send(wait=False)

    def send(self, wait: bool) -> None:
        """Send everything queued; with ``wait`` return once the sinks have it."""
        with self._send_lock:
            with self._lock:
                items, self._items = self._items, []
            if not items:
                return
            by_sink: dict[Any, list[tuple]] = {}
            for sink, record in items:
                by_sink.setdefault(sink, []).append(record)
            pending = []
            for sink, records in by_sink.items():
                client = self._client(sink)
                if client is not None:
                    pending += client.push(records, wait)
        if wait and pending:
            import ray

            try:
                ray.get(pending, timeout=SINK_TIMEOUT_S)
            except Exception:  # a sink that is gone loses its lines, the task still returns
                pass

    def _client(self, sink: Any) -> Any:
        if sink not in self._sinks:
            try:
                self._sinks[sink] = (SocketSink(*sink) if isinstance(sink, tuple)
                                     else ActorSink(sink))
            except Exception:
                self._sinks[sink] = None
        return self._sinks[sink]


class SocketSink:
    """The driver's `sink.OutputServer`, reached over one authenticated connection."""

    def __init__(self, address: str, secret: bytes) -> None:
        from nbdist.wire import transport
        from nbdist.wire.frames import FrameReader

        self.sock: Any = transport.connect(address, secret, SINK_TIMEOUT_S)
        self.sock.settimeout(SINK_TIMEOUT_S)
        self.reader = FrameReader()

    def push(self, records: list[tuple], wait: bool) -> list[Any]:
        """Send (the caller holds the outbox's send lock); with ``wait``, until acknowledged.
        Returns nothing left to wait for (`ActorSink.push` returns the call's ref)."""
        from nbdist.wire.frames import encode

        if self.sock is None:
            return []
        try:
            self.sock.sendall(encode([("rec", records, wait)]))
            if wait:
                while not self.reader.feed(self.sock.recv(4096) or _closed()):
                    pass
        except OSError:  # the driver is gone: its lines are lost, calls go on
            self.sock.close()
            self.sock = None
        return []


class ActorSink:
    """The `sink.OutputSink` actor, for a driver attached through Ray Client."""

    def __init__(self, name: str) -> None:
        import ray

        self.handle = ray.get_actor(name, namespace=SINK_NAMESPACE)

    def push(self, records: list[tuple], wait: bool) -> list[Any]:
        return [self.handle.push.remote(records)]


def _closed() -> bytes:
    raise ConnectionResetError("the output sink closed the connection")


outbox = Outbox()


class CapturedStream:
    """``sys.stdout``/``sys.stderr`` of a worker: lines written during a call become output
    records for the driver; other writes go to the original stream."""

    def __init__(self, original: Any, stream: str) -> None:
        self.original = original
        self.stream = stream
        self.encoding = str(getattr(original, "encoding", "utf-8"))
        self.errors = "replace"

    def write(self, text: str) -> int:
        info = current.get()
        if info is None or info.sink is None:
            self.original.write(text)
            return len(text)
        buf = info.partial.get(self.stream, "") + text
        if "\n" in buf:
            head, _, tail = buf.rpartition("\n")
            info.partial[self.stream] = tail
            for line in head.split("\n"):
                _emit(info, self.stream, line)
        else:
            info.partial[self.stream] = buf
        return len(text)

    def flush(self) -> None:
        info = current.get()
        if info is None or info.sink is None:
            self.original.flush()
            return
        rest = info.partial.pop(self.stream, "")
        if rest:
            _emit(info, self.stream, rest)

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return int(self.original.fileno())



def _emit(info: CallInfo, stream: str, line: str) -> None:
    info.printed = True
    assert info.sink is not None
    outbox.add(info.sink, ("out", info.task_hex(), actor_label(info.owner) or info.name,
                           os.getpid(), stream, line, info.tag, time.time()))


def actor_label(obj: Any) -> str | None:
    """An actor's own ``__repr__``, if its class defines one: its output lines go under
    that name, as Ray prints them."""
    if obj is None or type(obj).__repr__ is object.__repr__:
        return None
    try:
        return repr(obj)[:200]
    except Exception:  # a broken __repr__ must not lose the line
        return None


_installed = False
_install_lock = threading.Lock()


def install() -> None:
    """Once per worker process: captured stdout/stderr (`backend.use_in_worker` also makes
    nbdist's API run on Ray here)."""
    global _installed
    if _installed:
        return
    with _install_lock:
        if _installed:
            return
        job_sink()
        sys.stdout = CapturedStream(sys.stdout, "stdout")
        sys.stderr = CapturedStream(sys.stderr, "stderr")
        from nbdist.backends.ray import breakpoints

        # breakpoint() says which debugger attaches, then stops as Ray's
        breakpoints.install(lambda: getattr(current.get(), "name", "?"))
        _installed = True


def _finish_output(info: CallInfo) -> None:
    if info.partial:
        for stream in ("stdout", "stderr"):
            rest = info.partial.pop(stream, "")
            if rest and info.sink is not None:
                _emit(info, stream, rest)
    if info.printed:
        outbox.send(wait=True)


# ----------------------------------------------------------------------------- failures


def _engine_frame(filename: str) -> bool:
    return filename.startswith(_NBDIST_DIR) or f"{os.sep}ray{os.sep}" in filename


def failure(name: str, exc: Exception, retry: Any) -> TaskFailure:
    """The TaskFailure to raise for ``exc`` (retryable if it matches ``retry``)."""
    import ray

    if isinstance(exc, TaskError):
        err: TaskError = exc  # a failed dependency or nested task: keep the original
    else:
        cause: BaseException | None = exc
        try:
            ray.cloudpickle.loads(ray.cloudpickle.dumps(exc))
        except Exception:
            cause = None
        text = format_user_traceback(exc, _engine_frame)
        try:
            task_id = ray.get_runtime_context().get_task_id() or ""
        except Exception:
            task_id = ""
        err = TaskError(name, text, cause, os.getpid(), task_id).as_instanceof_cause()
    retryable = retry is True or (isinstance(retry, tuple) and isinstance(exc, retry))
    return RetryableTaskFailure(err) if retryable else TaskFailure(err)


# ----------------------------------------------------------------------------- tasks


def run_call(fn: Any, name: str, retry: Any, tag: str | None, args: Any, kwargs: Any,
             setup: Any) -> Any:
    """One call: nbdist's API on Ray (``setup``, once per process), the call's context for
    output, its exception as a TaskFailure. Inline rather than a context manager: it runs
    around every task and actor call."""
    if not _installed:
        setup()
    info = CallInfo(name, tag, _sink[0], owner=getattr(fn, "__self__", None))
    token = current.set(info)
    try:
        value = fn(*args, **kwargs)
        if inspect.iscoroutine(value):
            value = asyncio.run(value)
        return value
    except Exception as exc:
        raise failure(name, exc, retry) from None
    finally:
        _finish_output(info)
        current.reset(token)


async def run_call_async(fn: Any, name: str, tag: str | None, args: Any, kwargs: Any,
                         setup: Any) -> Any:
    if not _installed:
        setup()
    info = CallInfo(name, tag, _sink[0], owner=getattr(fn, "__self__", None))
    token = current.set(info)
    try:
        value = fn(*args, **kwargs)
        if inspect.iscoroutine(value):
            value = await value
        return value
    except Exception as exc:
        if type(exc).__name__ == "AsyncioActorExit":  # exit_actor(): Ray ends the actor
            raise
        raise failure(name, exc, False) from None
    finally:
        _finish_output(info)
        current.reset(token)


def make_task_function(fn: Any, name: str, retry: Any, setup: Any) -> Any:
    """The function Ray runs for the nbdist task ``fn`` (named like it in Ray's views);
    ``setup`` (`backend.use_in_worker`, pickled by reference) installs nbdist in a worker."""

    def run(*args: Any, **kwargs: Any) -> Any:
        return run_call(fn, name, retry, None, args, kwargs, setup)

    run.__name__ = run.__qualname__ = name
    run.__doc__ = fn.__doc__
    return run


# ----------------------------------------------------------------------------- actors


class SyncHost:
    """A Ray actor holding one nbdist actor object (``_nbdist_class``, set per subclass).

    Each of the user's public methods is a method of the host of the same name (see
    `make_host_class`), so a call is ``handle.m.remote(*args)``: Ray names the task
    ``Class.m`` itself and no per-call ``options`` or method-name argument is needed (both
    cost Ray time on every call). Other names go through ``nbdist_call``."""

    _nbdist_class: type = object
    _nbdist_name = "?"
    _nbdist_methods: dict[str, Any] = {}

    def __init__(self, nbdist_tag: str | None, *args: Any, **kwargs: Any) -> None:
        self._nbdist_obj = run_call(self._nbdist_class, f"{self._nbdist_name}.__init__", False,
                                    nbdist_tag, args, kwargs, self._nbdist_setup)

    @staticmethod
    def _nbdist_setup() -> None:
        raise NotImplementedError  # set per subclass: `backend.use_in_worker`

    def nbdist_call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return run_call(getattr(self._nbdist_obj, method), f"{self._nbdist_name}.{method}",
                        False, None, args, kwargs, self._nbdist_setup)

    def nbdist_meta(self) -> tuple[str, dict[str, Any]]:
        return self._nbdist_name, self._nbdist_methods


class AsyncHost(SyncHost):
    """The host of an actor with ``async def`` methods: calls run as coroutines."""

    async def nbdist_call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return await run_call_async(getattr(self._nbdist_obj, method),
                                    f"{self._nbdist_name}.{method}", None, args, kwargs,
                                    self._nbdist_setup)


def direct_method(name: str) -> bool:
    """Whether the host has a method ``name`` of its own for the user's method ``name``."""
    return name.isidentifier() and not name.startswith("_") and not hasattr(AsyncHost, name)


def _host_method(method: str, task_name: str, is_async: bool) -> Any:
    if is_async:
        async def call_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            return await run_call_async(getattr(self._nbdist_obj, method), task_name,
                                        None, args, kwargs, self._nbdist_setup)

        call: Any = call_async
    else:
        def call_sync(self: Any, *args: Any, **kwargs: Any) -> Any:
            return run_call(getattr(self._nbdist_obj, method), task_name, False, None,
                            args, kwargs, self._nbdist_setup)

        call = call_sync
    call.__name__ = call.__qualname__ = method
    return call


def make_host_class(cls: type, methods: dict[str, Any], setup: Any) -> type:
    """A host class for ``cls``, named like it so Ray's views show the user's class name."""
    is_async = any(inspect.iscoroutinefunction(m) for _, m in
                   inspect.getmembers(cls, predicate=inspect.isfunction))
    base = AsyncHost if is_async else SyncHost
    namespace: dict[str, Any] = {
        "_nbdist_class": cls, "_nbdist_name": cls.__name__, "_nbdist_methods": methods,
        "__module__": __name__, "_nbdist_setup": staticmethod(setup)}
    for name in methods:
        if direct_method(name):
            namespace[name] = _host_method(name, f"{cls.__name__}.{name}", is_async)
    return type(cls.__name__, (base,), namespace)

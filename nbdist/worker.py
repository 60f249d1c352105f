"""A worker process: runs tasks, or hosts one actor (layer L2).

Forked by the node daemon; talks to it over an authenticated socketpair through a
`runtime.CoreClient`, so code inside tasks can submit, put, get and wait like a driver (a task
blocked in `get` tells the node, which lends its CPU to other work meanwhile).

Threads: the connection's reader thread receives ``EXEC`` and queues it; the main thread runs
plain tasks and sync actor methods one at a time, in arrival order (so one caller's calls run in
submission order). A threaded actor (``max_concurrency > 1``) runs methods on a thread pool; an
async actor runs them as coroutines on an event loop thread. ``INTERRUPT`` raises
KeyboardInterrupt in the main thread when it runs the named task (non-forced cancel).

Output: ``sys.stdout``/``sys.stderr`` are replaced by streams that send each completed line to
the node, tagged with the task that printed it.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import os
import signal
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from . import protocol as P
from . import runtime, serialization, store, transport
from .exceptions import SerializationError

_ENGINE_DIR = os.path.dirname(os.path.abspath(__file__))


def _engine_frame(filename: str) -> bool:
    return filename.startswith(_ENGINE_DIR) or "cloudpickle" in filename


class TaskStream:
    """A text stream that ships lines to the driver, tagged with the running task."""

    def __init__(self, worker: Worker, stream: str) -> None:
        self.worker = worker
        self.stream = stream
        self.local = threading.local()
        self.encoding = "utf-8"
        self.errors = "replace"

    def write(self, text: str) -> int:
        buf = getattr(self.local, "buf", "") + text
        if "\n" in buf:
            head, _, tail = buf.rpartition("\n")
            self.local.buf = tail
            self.worker.send_output(self.stream, head + "\n")
        else:
            self.local.buf = buf
        return len(text)

    def flush(self) -> None:
        buf = getattr(self.local, "buf", "")
        if buf:
            self.local.buf = ""
            self.worker.send_output(self.stream, buf + "\n")

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        raise OSError("task output is captured and has no file descriptor")


class Worker:
    def __init__(self, client: runtime.CoreClient) -> None:
        self.client = client
        # Calls to run on the main thread, in arrival order; None means exit.
        self.inbox: collections.deque[tuple | None] = collections.deque()
        self.fn_bytes: dict[int, bytes] = {}
        self.fns: dict[int, Any] = {}
        self.instance: Any = None
        self.actor_id = 0
        self.running_main = 0
        self.pool: ThreadPoolExecutor | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.async_sem: asyncio.Semaphore | None = None
        self.pid = os.getpid()
        client.on_other = self.on_message

    # -------------------------------------------------------------- messages
    def on_message(self, msg: tuple) -> None:
        op = msg[0]
        if op == P.EXEC:
            spec = msg[1]
            if self.actor_id and spec[P.S_METHOD] != P.ACTOR_INIT and (self.pool or self.loop):
                self.run_concurrent(msg)
            else:
                self.inbox.append(msg)
        elif op == P.FN:
            self.fn_bytes[msg[1]] = msg[2]
        elif op == P.INTERRUPT:
            if self.running_main == msg[1] and threading.current_thread() is not \
                    threading.main_thread():
                # A real signal, so a task sleeping or blocked in a system call wakes up.
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        elif op == P.EXIT:
            self.inbox.append(None)

    def on_sigint(self, signum: int, frame: Any) -> None:
        # The node signals a worker to cancel the task it runs; one that arrives after the
        # task ended has nothing to stop.
        if self.running_main:
            raise KeyboardInterrupt

    def send_output(self, stream: str, text: str) -> None:
        task_id = self.client.ctx.task_id
        try:
            self.client.send([(P.STDOUT, task_id, stream, text)])
        except Exception:
            pass

    # -------------------------------------------------------------- main loop
    def serve(self) -> None:
        """The main thread reads the connection itself while idle, so a task starts with no
        thread hand-off; while it runs user code, threads that need messages read them."""
        inbox = self.inbox
        client = self.client
        while True:
            while not inbox:
                if not client.pump(None):
                    return
            msg = inbox.popleft()
            if msg is None:
                return
            if (self.pool or self.loop) and msg[1][P.S_METHOD] != P.ACTOR_INIT:
                # Calls that arrived while the constructor ran.
                self.run_concurrent(msg)
                continue
            try:
                self.execute(msg, main=True)
            except KeyboardInterrupt:
                # An interrupt that arrived just after its task ended: nothing to stop.
                continue

    def run_concurrent(self, msg: tuple) -> None:
        spec = msg[1]
        if self.loop is not None:
            method = getattr(self.instance, spec[P.S_METHOD], None)
            if inspect.iscoroutinefunction(method):
                asyncio.run_coroutine_threadsafe(self.execute_async(msg), self.loop)
                return
            self.loop.call_soon_threadsafe(self.execute, msg)
            return
        assert self.pool is not None
        self.pool.submit(self.execute, msg)

    # -------------------------------------------------------------- execution
    def load_fn(self, fid: int) -> Any:
        fn = self.fns.get(fid)
        if fn is None:
            data = self.fn_bytes.pop(fid)
            fn = serialization.loads(data)
            self.fns[fid] = fn
        return fn

    def decode_args(self, spec: tuple, dep_locs: list) -> tuple[list[Any], dict[str, Any]]:
        blob = spec[P.S_ARGS]
        if not blob:
            return [], {}
        if blob == P.ARGS_ALL_DEPS:
            value = self.client.value
            return [value(loc) for loc in dep_locs], {}
        args, kwargs = serialization.loads(blob)
        if dep_locs:
            values = [self.client.value(loc) for loc in dep_locs]
            args = [values[a.index] if isinstance(a, runtime._Dep) else a for a in args]
            if kwargs:
                kwargs = {k: values[v.index] if isinstance(v, runtime._Dep) else v
                          for k, v in kwargs.items()}
        return args, kwargs

    def prepare(self, msg: tuple) -> tuple[Any, list[Any], dict[str, Any]]:
        _, spec, dep_locs, gpu_ids = msg
        if gpu_ids:
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpu_ids)
        args, kwargs = self.decode_args(spec, dep_locs)
        method = spec[P.S_METHOD]
        if spec[P.S_ACTOR] and method == P.ACTOR_INIT:
            return self.load_fn(spec[P.S_FID]), args, kwargs
        if spec[P.S_ACTOR]:
            return getattr(self.instance, method), args, kwargs
        return self.load_fn(spec[P.S_FID]), args, kwargs

    def enter(self, spec: tuple) -> tuple[int, int, int, str]:
        ctx = self.client.ctx
        saved = (ctx.task_id, ctx.job, ctx.actor_id, ctx.name)
        ctx.task_id = spec[P.S_TASK_ID]
        ctx.job = spec[P.S_JOB]
        ctx.actor_id = spec[P.S_ACTOR]
        ctx.name = spec[P.S_NAME]
        return saved

    def leave(self, saved: tuple[int, int, int, str]) -> None:
        ctx = self.client.ctx
        ctx.task_id, ctx.job, ctx.actor_id, ctx.name = saved

    def execute(self, msg: tuple, main: bool = False) -> None:
        spec = msg[1]
        task_id = spec[P.S_TASK_ID]
        saved = self.enter(spec)
        t0 = time.time()
        if main:
            self.running_main = task_id
        try:
            try:
                fn, args, kwargs = self.prepare(msg)
                value = fn(*args, **kwargs)
                if inspect.iscoroutine(value):
                    value = self.await_on_loop(value)
            finally:
                if main:
                    self.running_main = 0
            self.finish(spec, value, t0)
        except BaseException as exc:  # the user's error, reported with its traceback
            self.fail(spec, exc, t0)
        finally:
            _flush_streams()
            self.leave(saved)

    async def execute_async(self, msg: tuple) -> None:
        spec = msg[1]
        assert self.async_sem is not None
        async with self.async_sem:
            saved = self.enter(spec)
            t0 = time.time()
            try:
                fn, args, kwargs = self.prepare(msg)
                value = await fn(*args, **kwargs)
                self.finish(spec, value, t0)
            except BaseException as exc:
                self.fail(spec, exc, t0)
            finally:
                self.leave(saved)

    def await_on_loop(self, coro: Any) -> Any:
        if self.loop is None:
            return asyncio.run(coro)
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def finish(self, spec: tuple, value: Any, t0: float) -> None:
        if spec[P.S_ACTOR] and spec[P.S_METHOD] == P.ACTOR_INIT:
            self.instance = value
            self.actor_id = spec[P.S_ACTOR]
            self.setup_actor(spec)
            value = None
        nret = spec[P.S_NRET]
        if nret == 1:
            values = [value]
        elif nret == 0:
            values = []
        else:
            values = list(value)
            if len(values) != nret:
                raise ValueError(
                    f"Task {spec[P.S_NAME]!r} declared num_returns={nret} but returned "
                    f"{len(values)} values.")
        locs = []
        first = spec[P.S_TASK_ID] + 1
        for i, v in enumerate(values):
            locs.append(self.store_value(first + i, v, spec[P.S_NAME]))
        self.client.send([(P.RESULT, spec[P.S_TASK_ID], True, locs, None, t0, time.time())])

    def store_value(self, oid: int, value: Any, name: str) -> tuple:
        try:
            parts, size, contained = serialization.dumps(value)
        except Exception as exc:
            raise SerializationError(
                f"Could not serialize the return value of task {name!r} (type "
                f"{type(value).__name__}): {exc}. Return picklable values.") from exc
        client = self.client
        if size <= client.inline_max:
            return (oid, serialization.join(parts), 0, contained)
        client.reserve(oid, size)
        store.write(client._shm_path(oid), parts, size, client._warm_base())
        return (oid, None, size, contained)

    def fail(self, spec: tuple, exc: BaseException, t0: float) -> None:
        name = spec[P.S_NAME]
        if spec[P.S_ACTOR] and spec[P.S_METHOD] != P.ACTOR_INIT:
            name = f"{name}"
        blob = serialization.error_blob(name, exc, self.pid, f"{spec[P.S_TASK_ID]:x}",
                                        _engine_frame)
        try:
            self.client.send([(P.RESULT, spec[P.S_TASK_ID], False, [], blob, t0, time.time())])
        except Exception:
            os._exit(1)

    def setup_actor(self, spec: tuple) -> None:
        extra = spec[P.S_EXTRA] or {}
        cls = type(self.instance)
        is_async = any(inspect.iscoroutinefunction(m) for _, m in
                       inspect.getmembers(cls, predicate=inspect.isfunction))
        concurrency = extra.get("max_concurrency")
        if is_async:
            loop = asyncio.new_event_loop()
            self.loop = loop
            self.async_sem = asyncio.Semaphore(concurrency or 1000)
            threading.Thread(target=loop.run_forever, name="nbdist-actor-loop",
                             daemon=True).start()
        elif concurrency and concurrency > 1:
            self.pool = ThreadPoolExecutor(concurrency, thread_name_prefix="nbdist-actor")


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def main(sock: socket.socket, secret: bytes, node_info: dict[str, Any]) -> None:
    sock.setblocking(True)
    transport.client_handshake(sock, secret)
    info = dict(node_info)
    client = runtime.CoreClient(sock, info, P.KIND_WORKER)
    runtime.set_client(client)
    worker = Worker(client)
    sys.stdout = TaskStream(worker, "stdout")
    sys.stderr = TaskStream(worker, "stderr")
    signal.signal(signal.SIGINT, worker.on_sigint)
    client.start(reader_thread=False)
    worker.serve()

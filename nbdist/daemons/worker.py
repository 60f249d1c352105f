"""A worker process: runs tasks, or hosts one actor (layer L2).

Forked by the node daemon; talks to it over an authenticated socketpair through a
`runtime.CoreClient`, so code inside tasks can submit, put, get and wait like a driver (a task
blocked in `get` tells the node, which lends its CPU to other work meanwhile).

Threads: the connection's reader thread receives ``EXEC`` and queues it; the main thread runs
plain tasks and sync actor methods one at a time, in arrival order (so one caller's calls run in
submission order). A threaded actor (``max_concurrency > 1``) runs methods on a thread pool per
concurrency group; an async actor runs them on an event loop thread per group (coroutines, and
the group's sync methods), so a call that blocks its group holds up no other group.
``INTERRUPT`` raises KeyboardInterrupt in the main thread when it runs the named task
(non-forced cancel).

Output: ``sys.stdout``/``sys.stderr`` are replaced by streams that send each completed line to
the node, tagged with the task that printed it.

Run records: a library run executed here (a dataset consumed in a task, an actor or a Train
worker) publishes ``RunUpdate``s in this process; `RunRelay` sends them, marked with the task
and actor that made them, to the node for the job's driver (``RUNS``): batched every
``RELAY_INTERVAL_S``, a member's updates coalesced to its last, and before the task's result.
A worker whose tasks publish none sends nothing and starts no thread.

Direct calls (`nbdist.driver.direct`): an actor's worker also listens for links from drivers on its
node (`links.Endpoint`). A call that comes on a link (``CALL``) joins the same inbox as the
node's ``EXEC``; the main thread fetches its arguments that were not ready (in arrival order,
as the node would; for a threaded or async actor, a helper thread waits for them while later
calls run, as in Ray), runs it or hands it to the actor's pool or loop, and answers on the link:
DONE with inline results, or, for results the node must hold (in shared memory, containing
refs), ``DIRECT_RESULT`` to the node, which answers the caller. Its output goes on the link.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import inspect
import os
import signal
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from nbdist import events
from nbdist.daemons import debugger
from nbdist.driver import generators, runtime, runtime_env
from nbdist.driver.actor import READY_METHOD
from nbdist.driver.client_parts import Dep
from nbdist.exceptions import (
    ActorDiedError,
    DebuggerQuit,
    SerializationError,
    TaskCancelledError,
    TaskError,
)
from nbdist.wire import links, serialization, transport
from nbdist.wire import protocol as P

_ENGINE_DIR = os.path.dirname(os.path.abspath(__file__))
# Threads of a threaded or async actor waiting for calls' arguments at once (more wait in turn).
ARG_WAITERS = 16


def _engine_frame(filename: str) -> bool:
    return (filename.startswith(_ENGINE_DIR) or "cloudpickle" in filename
            or filename == generators.__file__)


class _Queued:
    """``pump``'s ``until`` for the main thread's idle read: set once a call is queued."""

    __slots__ = ("inbox",)

    def __init__(self, inbox: collections.deque[tuple | None]) -> None:
        self.inbox = inbox

    def is_set(self) -> bool:
        return bool(self.inbox)


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


class RunRelay(events.PullQueue):
    """The run records published in this worker, sent to the node for each job's driver.

    ``add`` runs on the publishing thread (inside ``events.publish``): it marks the record
    with the running task and actor and keeps the last per (job, run, member); a sender thread,
    started by the first record, sends what is kept every ``RELAY_INTERVAL_S``."""

    def __init__(self, worker: Worker) -> None:
        super().__init__(("run_update",), 0)
        self.worker = worker
        self.lock = threading.Lock()
        self.kept: dict[tuple[int, str, str], tuple] = {}
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None
        self.sent_messages = 0
        self.sent_records = 0

    def add(self, item: Any) -> None:
        cls, values = events.fields(item)
        if cls is not events.RunUpdate:
            return
        ctx = self.worker.client.ctx
        values = tuple(values)
        n = len(dataclasses.fields(cls))
        values = (*values, *(None,) * (n - len(values)))
        values = (*values[:-2], values[-2] or ctx.task_id or None,
                  values[-1] or self.worker.actor_id or ctx.actor_id or None)
        # (time, library, run, member, ...): a member's newer update replaces the one kept;
        # a thread of the task's own (a dataset's prefetcher) has no call: the last one's job
        key = (ctx.job or self.worker.last_job, values[2], values[3])
        with self.lock:
            self.kept.pop(key, None)
            self.kept[key] = (cls.code, values)
            if self.thread is None:
                self.thread = threading.Thread(target=self.run, name="nbdist-run-relay",
                                               daemon=True)
                self.thread.start()
        self.wake.set()

    def run(self) -> None:
        while True:
            self.wake.wait()
            time.sleep(RELAY_INTERVAL_S)  # deliberate sleep: a batch's window (coalescing)
            self.wake.clear()
            self.send()

    def send(self) -> None:
        """Send what is kept now (also on the task's thread, before its result)."""
        with self.lock:
            kept, self.kept = self.kept, {}
        if not kept:
            return
        by_job: dict[int, list[tuple]] = {}
        for (job, _, _), record in kept.items():
            by_job.setdefault(job, []).append(record)
        try:
            self.worker.client.send([(P.RUNS, job, records) for job, records in by_job.items()])
        except Exception:
            return  # the node is gone
        self.sent_messages += 1
        self.sent_records += len(kept)


# How long a worker's run records wait to be sent with the next ones (a data run publishes its
# operators' updates at most every 0.25 s).
RELAY_INTERVAL_S = 0.1


class Worker:
    def __init__(self, client: runtime.CoreClient, secret: bytes = b"") -> None:
        self.client = client
        self.secret = secret
        self.endpoint: links.Endpoint | None = None
        self.cancelled: set[int] = set()  # direct calls cancelled by their caller
        self.running_async: dict[int, asyncio.Task] = {}  # async calls started
        # Calls to run on the main thread, in arrival order; None means exit.
        self.inbox: collections.deque[tuple | None] = collections.deque()
        self.fn_bytes: dict[int, bytes] = {}
        self.fns: dict[int, Any] = {}
        self.instance: Any = None
        self.actor_id = 0
        self.actor_group: tuple | None = None  # the placement group the actor runs in
        self.actor_spec: tuple | None = None  # its constructor call (the runtime context's)
        self.saved_cuda_env: str | None = None  # CUDA_VISIBLE_DEVICES before a task set it
        self.running_main = 0
        self.last_job = 0  # the driver of the last call begun (a helper thread's records')
        self.interrupted = 0  # the main thread's task that a cancel interrupted
        self.pool: ThreadPoolExecutor | None = None
        self.arg_pool: ThreadPoolExecutor | None = None  # waits for a concurrent call's args
        self.loop: asyncio.AbstractEventLoop | None = None  # an async actor's default group
        self.async_sem: asyncio.Semaphore | None = None
        # Concurrency groups: a pool (threaded actor), or an event loop thread and a limit
        # (async actor) per group, so a group whose calls block holds up no other group; and
        # the group each method declared; a call may name another (``method@group``).
        self.group_pools: dict[str, ThreadPoolExecutor] = {}
        self.group_loops: dict[str, asyncio.AbstractEventLoop] = {}
        self.group_sems: dict[str, asyncio.Semaphore] = {}
        self.method_groups: dict[str, str] = {}
        self.pid = os.getpid()
        client.on_other = self.on_message
        client.worker = self
        self.relay = RunRelay(self)
        events.bus().pull(self.relay.kinds, queue=self.relay)

    # -------------------------------------------------------------- messages
    def on_message(self, msg: tuple) -> None:
        op = msg[0]
        if op == P.EXEC:
            spec = msg[1]
            if msg[2]:  # leases on the arguments in the arena, held until the task is done
                msg = (op, spec, self.client.with_leases(msg[2]), *msg[3:])
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
            elif msg[1] in self.running_async:
                # An async method: CancelledError in its coroutine, as for a direct call.
                self.cancel_async(msg[1])
        elif op == P.EXIT:
            self.inbox.append(None)

    def on_sigint(self, signum: int, frame: Any) -> None:
        # The node signals a worker to cancel the task it runs; one that arrives after the
        # task ended has nothing to stop.
        if self.running_main:
            self.interrupted = self.running_main
            raise KeyboardInterrupt

    def is_canceled(self, task_id: int) -> bool:
        """Whether a cancel reached ``task_id`` (the runtime context's ``is_canceled()``)."""
        if self.loop is not None and self.actor_id:
            raise RuntimeError("is_canceled() is not supported in an async actor: a cancel "
                               "raises asyncio.CancelledError in the call's coroutine.")
        return bool(task_id) and (task_id == self.interrupted or task_id in self.cancelled)

    def send_output(self, stream: str, text: str) -> None:
        ctx = self.client.ctx
        label = self.actor_label()
        try:
            if ctx.link is not None:
                ctx.link.send([(P.LOG, ctx.task_id, label or ctx.name, self.pid, stream, text)])
            else:
                self.client.send([(P.STDOUT, ctx.task_id, stream, text, label)
                                  if label else (P.STDOUT, ctx.task_id, stream, text)])
        except Exception:
            pass

    def actor_label(self) -> str | None:
        """The actor's own ``__repr__``, if its class defines one: its output lines go under
        that name, as in Ray (a library names an actor by what it runs now, e.g. a trial)."""
        instance = self.instance
        if instance is None or type(instance).__repr__ is object.__repr__:
            return None
        try:
            return repr(instance)[:200]
        except Exception:  # a broken __repr__ must not lose the line
            return None

    # -------------------------------------------------------------- direct links
    def listen(self) -> None:
        """Take direct calls from drivers on this node (an actor's worker)."""
        sock_dir = links.socket_dir(self.client.info)
        if not (sock_dir and self.secret and self.client.info["config"].get(
                "direct_actor_calls", True)):
            return
        try:
            self.endpoint = links.Endpoint(sock_dir, self.secret, self.actor_id, self.accepted)
        except OSError:
            return  # calls keep coming through the node
        self.client.conn.watch_extra = True

    def accepted(self, sock: socket.socket, pid: int) -> None:
        link = links.Link(sock, lambda msgs: self.on_link(link, msgs), self.link_closed, pid)
        self.client.conn.add_extra(link)

    def link_closed(self, link: links.Link) -> None:
        self.client.conn.remove_extra(link)

    def on_link(self, link: links.Link, msgs: list[Any]) -> None:
        for msg in msgs:
            if msg[0] == P.CALL:
                self.inbox.append((P.EXEC, msg[1], msg[2], [], link))
            elif msg[0] == P.CALL_CANCEL:
                self.cancel_call(link, msg[1], len(msg) > 2 and bool(msg[2]))

    def cancel_call(self, link: links.Link, task_id: int, recursive: bool = False) -> None:
        if recursive:  # the tasks it submitted (and will) are known to this worker's node
            self.client.send([(P.CANCEL, task_id + 1, False, True, True)])
        for msg in list(self.inbox):
            if msg is not None and len(msg) > 4 and msg[1][P.S_TASK_ID] == task_id:
                try:
                    self.inbox.remove(msg)
                except ValueError:
                    break  # taken to run meanwhile
                err = TaskCancelledError(f"Task {msg[1][P.S_NAME]!r} was cancelled.")
                self.reply_error(msg[1], serialization.system_error_blob(err), 0.0, link)
                return
        # Started: an async method is cancelled (CancelledError in its coroutine); a sync
        # one runs to its end, as in Ray (an actor's state would be left half-changed).
        if self.loop is not None:
            self.cancelled.add(task_id)
            self.cancel_async(task_id)

    def cancel_async(self, task_id: int) -> None:
        """Cancel a running async call from any thread: on the loop of its group."""
        task = self.running_async.get(task_id)
        if task is not None:
            task.get_loop().call_soon_threadsafe(task.cancel)

    def resolve(self, msg: tuple) -> tuple | None:
        """A direct call with every argument's location (fetched from the node if it was not
        ready when sent); None if an argument failed (the call fails with its error)."""
        spec = msg[1]
        # A location in the arena from the caller is no lease of ours: ask the node for it.
        locs: list[Any] = [None if loc is not None and P.loc_offset(loc) >= 0 else loc
                           for loc in msg[2]]
        missing = [dep for dep, loc in zip(spec[P.S_DEPS], locs, strict=True) if loc is None]
        if missing:
            got = self.client.fetch(missing, coming=True)
            locs = [got[dep] if loc is None else loc
                    for dep, loc in zip(spec[P.S_DEPS], locs, strict=True)]
        for loc in locs:
            blob = loc[1]
            if blob is not None and blob[:1] in (b"E", b"S"):
                self.reply_error(spec, blob, 0.0, msg[4])
                return None
        return (P.EXEC, spec, locs, [], msg[4])

    # -------------------------------------------------------------- main loop
    def serve(self) -> None:
        """The main thread reads the connection itself while idle, so a task starts with no
        thread hand-off; while it runs user code, threads that need messages read them."""
        inbox = self.inbox
        client = self.client
        while True:
            if not inbox:
                while not inbox:
                    # Another thread reading the connection (a threaded actor's method in a
                    # nested get) may queue a direct call here just before this thread takes
                    # the read lock: pump re-checks the inbox under that lock, so such a call
                    # never waits in the inbox while this thread blocks in select().
                    if not client.pump(None, _Queued(inbox)):
                        return
            elif self.endpoint is not None:
                # Calls waited here while the last one ran: read what came meanwhile (a
                # caller's cancel of one of them) before starting the next.
                client.pump(0)
                if not inbox:
                    continue
            msg = inbox.popleft()
            if msg is None:
                return
            if len(msg) > 4:  # a direct call: its arguments first, in arrival order
                if (self.pool or self.loop) and None in msg[2]:
                    # A threaded or async actor runs later calls whose arguments are ready
                    # while this one's are computed, as Ray's do (no order among its calls).
                    self.resolve_later(msg)
                    continue
                try:
                    resolved = self.resolve(msg)
                except Exception as exc:  # the node went away, or an argument is lost
                    self.fail(msg[1], exc, time.time(), msg[4])
                    continue
                if resolved is None:
                    continue
                msg = resolved
            if (self.pool or self.loop) and msg[1][P.S_METHOD] != P.ACTOR_INIT:
                # Calls that arrived while the constructor ran.
                self.run_concurrent(msg)
                continue
            try:
                self.execute(msg, main=True)
            except KeyboardInterrupt:
                # An interrupt that arrived just after its task ended: nothing to stop.
                continue

    def resolve_later(self, msg: tuple) -> None:
        if self.arg_pool is None:
            self.arg_pool = ThreadPoolExecutor(ARG_WAITERS, thread_name_prefix="nbdist-args")
        self.arg_pool.submit(self.resolve_then_run, msg)

    def resolve_then_run(self, msg: tuple) -> None:
        try:
            resolved = self.resolve(msg)
        except Exception as exc:  # the node went away, or an argument is lost
            self.fail(msg[1], exc, time.time(), msg[4])
            return
        if resolved is not None:
            self.run_concurrent(resolved)

    def run_concurrent(self, msg: tuple) -> None:
        name, _, group = msg[1][P.S_METHOD].partition("@")
        group = group or self.method_groups.get(name, "")
        if self.loop is not None:
            loop = self.group_loops.get(group, self.loop) if group else self.loop
            method = getattr(self.instance, name, None)
            if inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method):
                asyncio.run_coroutine_threadsafe(self.execute_async(msg, group), loop)
                return
            loop.call_soon_threadsafe(self.execute, msg)  # a sync method blocks its group
            return
        pool = self.group_pools.get(group, self.pool) if group else self.pool
        assert pool is not None
        pool.submit(self.execute, msg)

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
            args = [values[a.index] if isinstance(a, Dep) else a for a in args]
            if kwargs:
                kwargs = {k: values[v.index] if isinstance(v, Dep) else v
                          for k, v in kwargs.items()}
        return args, kwargs

    def prepare(self, msg: tuple) -> tuple[Any, list[Any], dict[str, Any]]:
        spec, dep_locs, gpu_ids = msg[1], msg[2], msg[3]
        runtime_env.enter_task(self.client, spec)  # before anything of the task is unpickled
        if (gpu_ids or self.client.gpu_ids) and spec[P.S_METHOD] in (None, P.ACTOR_INIT):
            self.use_gpus(gpu_ids)
        args, kwargs = self.decode_args(spec, dep_locs)
        method = spec[P.S_METHOD]
        if spec[P.S_ACTOR] and method == P.ACTOR_INIT:
            return self.constructor(self.load_fn(spec[P.S_FID])), args, kwargs
        if spec[P.S_ACTOR]:
            name = method.partition("@")[0]
            if name == READY_METHOD and not hasattr(self.instance, name):
                return _ready, args, kwargs
            return getattr(self.instance, name), args, kwargs
        return self.load_fn(spec[P.S_FID]), args, kwargs

    def use_gpus(self, gpu_ids: list[int]) -> None:
        """The GPUs the task (or actor) given to this process may use; a later task without
        any does not see the ones a task before it had."""
        if gpu_ids:
            if not self.client.gpu_ids:
                self.saved_cuda_env = os.environ.get("CUDA_VISIBLE_DEVICES")
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpu_ids)
        elif self.saved_cuda_env is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = self.saved_cuda_env
        self.client.gpu_ids = list(gpu_ids)

    def enter(self, spec: tuple, link: links.Link | None) -> tuple:
        ctx = self.client.ctx
        saved = (ctx.task_id, ctx.job, ctx.actor_id, ctx.name, ctx.link, ctx.group, ctx.spec)
        ctx.spec = spec
        ctx.task_id = spec[P.S_TASK_ID]
        ctx.job = self.last_job = spec[P.S_JOB]
        ctx.actor_id = spec[P.S_ACTOR]
        ctx.name = spec[P.S_NAME]
        ctx.link = link
        extra = spec[P.S_EXTRA]
        group = extra.get("pg") if extra else None
        if spec[P.S_METHOD] == P.ACTOR_INIT:
            self.actor_group = group
            self.actor_spec = spec
        ctx.group = group or self.actor_group
        return saved

    def leave(self, saved: tuple) -> None:
        ctx = self.client.ctx
        ctx.task_id, ctx.job, ctx.actor_id, ctx.name, ctx.link, ctx.group, ctx.spec = saved

    def execute(self, msg: tuple, main: bool = False) -> None:
        spec = msg[1]
        task_id = spec[P.S_TASK_ID]
        link = msg[4] if len(msg) > 4 else None
        saved = self.enter(spec, link)
        t0 = time.time()
        if main:
            self.running_main = task_id
            self.interrupted = 0
        try:
            try:
                fn, args, kwargs = self.prepare(msg)
                if args and type(args[0]) in generators.MARKERS:
                    value = generators.run(self.client, spec, fn, args, kwargs,
                                           lambda exc: self.error_blob(spec, exc))
                else:
                    value = fn(*args, **kwargs)
                if inspect.iscoroutine(value):
                    value = self.await_on_loop(value)
            finally:
                if main:
                    self.running_main = 0
            self.finish(spec, value, t0, link)
        except BaseException as exc:  # the user's error, reported with its traceback
            self.fail(spec, exc, t0, link)
        finally:
            debugger.task_ended()
            _flush_streams()
            self.leave(saved)

    def constructor(self, cls: Any) -> Any:
        """``cls`` itself, or for an ``async def __init__`` a function that awaits it on the
        actor's event loop (started first, so what it starts keeps running there)."""
        init = getattr(cls, "__init__", None)
        if not inspect.iscoroutinefunction(init):
            if isinstance(cls, type) and _is_async_class(cls):
                # As in Ray, the constructor's asyncio.get_event_loop() is the loop its
                # default group's calls run on.
                self.start_loop()
                asyncio.set_event_loop(self.loop)
            return cls

        def construct(*args: Any, **kwargs: Any) -> Any:
            instance = cls.__new__(cls)
            self.start_loop()
            self.await_on_loop(init(instance, *args, **kwargs))
            return instance

        return construct

    def start_loop(self) -> None:
        if self.loop is None:
            self.loop = _loop_thread("nbdist-actor-loop")

    async def execute_async(self, msg: tuple, group: str = "") -> None:
        spec = msg[1]
        task_id = spec[P.S_TASK_ID]
        link = msg[4] if len(msg) > 4 else None
        assert self.async_sem is not None
        t0 = time.time()
        task = asyncio.current_task()
        assert task is not None
        self.running_async[task_id] = task
        if task_id in self.cancelled:
            task.cancel()  # cancelled before it started: it ends at its first await
        try:
            async with self.group_sems.get(group, self.async_sem) if group else self.async_sem:
                saved = self.enter(spec, link)
                t0 = time.time()
                try:
                    fn, args, kwargs = self.prepare(msg)
                    if args and type(args[0]) in generators.MARKERS:
                        value = await generators.run_async(
                            self.client, spec, fn, args, kwargs,
                            lambda exc: self.error_blob(spec, exc))
                    else:
                        value = await fn(*args, **kwargs)
                    self.finish(spec, value, t0, link)
                finally:
                    self.leave(saved)
        except BaseException as exc:
            self.fail(spec, exc, t0, link)
        finally:
            self.running_async.pop(task_id, None)

    def await_on_loop(self, coro: Any) -> Any:
        if self.loop is None:
            return asyncio.run(coro)
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def finish(self, spec: tuple, value: Any, t0: float, link: links.Link | None) -> None:
        if spec[P.S_ACTOR] and spec[P.S_METHOD] == P.ACTOR_INIT:
            self.instance = value
            self.setup_actor(spec)
            value = None
        nret = spec[P.S_NRET]
        error = None
        if nret == 1 and not inspect.isgenerator(value):
            values = [value]
        elif nret == 0:
            values = []
        else:
            values, error = generators.static_returns(
                value, nret, lambda exc: self.error_blob(spec, exc))
            if error is None and len(values) != nret:
                raise ValueError(
                    f"Task {spec[P.S_NAME]!r} declared num_returns={nret} but returned "
                    f"{len(values)} values.")
        locs = []
        first = spec[P.S_TASK_ID] + 1
        for i, v in enumerate(values):
            locs.append(self.store_value(first + i, v, spec[P.S_NAME]))
        if error is not None:  # the returns its generator did not yield hold its error
            locs += [(oid, error, 0, ()) for oid in range(first + len(values), first + nret)]
        task_id = spec[P.S_TASK_ID]
        client = self.client
        if self.relay.kept:  # the driver has the task's run records before its result
            self.relay.send()
        if link is None:
            client.send([(P.RESULT, task_id, True, locs, None, t0, time.time())])
        elif all(loc[1] is not None and not loc[3] for loc in locs):
            # Refs the call's arguments carried, now held here: the node hears of that
            # before the caller, told the call ended, lets go of its own holds.
            client.flush_ref_ops()
            try:
                link.send([(P.DONE, task_id, True, locs, t0, time.time(), self.pid)])
            except OSError:
                pass  # the caller is gone
        else:
            client.send([(P.DIRECT_RESULT, task_id, spec[P.S_JOB], locs, t0, time.time())])

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
        offset = client.write_object(oid, parts, size)
        if offset >= 0:
            return (oid, None, size, contained, offset)
        return (oid, None, size, contained)

    def error_blob(self, spec: tuple, exc: BaseException) -> bytes:
        return serialization.error_blob(spec[P.S_NAME], exc, self.pid,
                                        f"{spec[P.S_TASK_ID]:x}", _engine_frame)

    def fail(self, spec: tuple, exc: BaseException, t0: float,
             link: links.Link | None = None) -> None:
        if isinstance(exc, SystemExit) and not isinstance(exc, TaskError):
            self.exit_by_user(spec, exc, t0, link)
        exc = debugger.on_failure(spec[P.S_NAME], exc)  # pdb's q; a live post-mortem
        blob = (serialization.system_error_blob(exc) if isinstance(exc, DebuggerQuit)
                else self.error_blob(spec, exc))
        if link is not None:
            if spec[P.S_TASK_ID] in self.cancelled:
                self.cancelled.discard(spec[P.S_TASK_ID])
                blob = serialization.system_error_blob(TaskCancelledError(
                    f"Task {spec[P.S_NAME]!r} was cancelled."))
            self.reply_error(spec, blob, t0, link)
            return
        if self.relay.kept:
            self.relay.send()
        try:
            self.client.send([(P.RESULT, spec[P.S_TASK_ID], False, [], blob, t0, time.time())])
        except Exception:
            os._exit(1)

    def exit_by_user(self, spec: tuple, exc: SystemExit, t0: float,
                     link: links.Link | None) -> None:
        """``sys.exit()`` in user code ends this process, never the caller: a task's caller
        sees its worker crash (retried as a crash is). In an actor, as in Ray, exit code 0
        is the actor's own end: the call fails with ActorDiedError and the actor is killed for
        good; another code is a crash, restarted and retried as one (``max_restarts``,
        ``max_task_retries``)."""
        _flush_streams()
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        actor_id = spec[P.S_ACTOR]
        if actor_id and code == 0:
            how = ("exit_actor()" if getattr(exc, "exit_actor", False)
                   else f"sys.exit({exc.code!r})")
            why = (f"it exited on purpose: {spec[P.S_NAME]!r} called {how} (exit type "
                   "INTENDED_USER_EXIT; an actor that exits is not restarted)")
            err = ActorDiedError(f"The actor {actor_id:x} cannot run the call: {why}.",
                                 f"{actor_id:x}")
            blob = serialization.system_error_blob(err)
            try:
                if link is not None:
                    self.reply_error(spec, blob, t0, link)
                else:
                    self.client.send([(P.RESULT, spec[P.S_TASK_ID], False, [], blob, t0,
                                       time.time())])
                self.client.send([(P.KILL_ACTOR, actor_id, True, why)])
            except Exception:
                pass
        os._exit(code)

    def reply_error(self, spec: tuple, blob: bytes, t0: float, link: links.Link) -> None:
        first = spec[P.S_TASK_ID] + 1
        locs = [(oid, blob, 0) for oid in range(first, first + spec[P.S_NRET])]
        try:
            link.send([(P.DONE, spec[P.S_TASK_ID], False, locs, t0, time.time(), self.pid)])
        except OSError:
            pass  # the caller is gone

    def setup_actor(self, spec: tuple) -> None:
        extra = spec[P.S_EXTRA] or {}
        cls = type(self.instance)
        members = inspect.getmembers(cls, predicate=inspect.isfunction)
        is_async = _is_async_class(cls)
        concurrency = extra.get("max_concurrency")
        groups: dict[str, int] = extra.get("concurrency_groups") or {}
        self.method_groups = {
            name: opts["concurrency_group"] for name, m in members
            if "concurrency_group" in (opts := getattr(m, "__nbdist_method_options__", {}))}
        # Every group's loop or pool exists before calls are taken as the actor's (actor_id).
        if is_async:
            self.group_loops = {g: _loop_thread(f"nbdist-{g}") for g in groups}
            self.async_sem = asyncio.Semaphore(concurrency or 1000)
            self.group_sems = {g: asyncio.Semaphore(n) for g, n in groups.items()}
            self.start_loop()
        elif (concurrency and concurrency > 1) or groups:
            self.group_pools = {g: ThreadPoolExecutor(n, thread_name_prefix=f"nbdist-{g}")
                                for g, n in groups.items()}
            self.pool = ThreadPoolExecutor(concurrency or 1, thread_name_prefix="nbdist-actor")
        self.actor_id = spec[P.S_ACTOR]
        self.listen()


def _ready() -> bool:
    return True


def _is_async_class(cls: type) -> bool:
    """An async actor's class: one with an ``async def`` method (its calls run on loops)."""
    return any(inspect.iscoroutinefunction(m) or inspect.isasyncgenfunction(m)
               for _, m in inspect.getmembers(cls, predicate=inspect.isfunction))


def _loop_thread(name: str) -> asyncio.AbstractEventLoop:
    """A new event loop running for ever on a daemon thread of its own."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name=name, daemon=True).start()
    return loop


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
    worker = Worker(client, secret)
    sys.stdout = TaskStream(worker, "stdout")
    sys.stderr = TaskStream(worker, "stderr")
    signal.signal(signal.SIGINT, worker.on_sigint)
    debugger.install(worker)
    client.start(reader_thread=False)
    try:
        worker.serve()
    finally:
        if worker.endpoint is not None:
            worker.endpoint.close()

"""The core client: what a driver (and every worker) uses to talk to its node (layer L2).

One `CoreClient` per process, over one `transport.Connection` to the local node daemon. Any
thread may submit, put, get or wait; the connection's reader thread applies what arrives
(results, pushed objects, notices) and wakes the waiting threads.

State (guarded by ``_lock`` where several threads touch it):

``_refs``      id -> number of live `ObjectRef` / actor-handle objects in this process. The node
               learns of 0 -> 1 and 1 -> 0 changes through ``REFS`` messages, queued in
               ``_ref_ops`` in the order they happened and sent in front of the next message (or by
               the flusher within ``FLUSH_S``), so a hold is never released before a later use.
               A burst of submissions (each within ``BURST_S`` of the one before, with no
               wait between them) queues its ``SUBMIT`` messages there too, in order with the
               holds and releases: the flusher, woken by the first of them, sends what has
               queued in one frame, and any other send or wait sends them first. One system
               call and one wake-up of the node per batch rather than per task; a lone
               submission, or one right after a wait, is sent at once.
``_cache``     id -> location of values this process may read: inline bytes, a range of the
               node's arena, or a shm file.
``_leases``    id -> the `_Lease` on the arena range of its cached location (see `nbdist.objects.store`):
               zero-copy views read from it keep it alive; its death gives the range back.
``_mapped``    id -> read-only mapping of a shm file, so repeated gets share memory.
``_waiters``   id -> the waiter blocked in get/wait on it, or a list when several are: one
               waiter object for a get of 100,000 refs, not 100,000 lists for the garbage
               collector to scan.
``_expected``  return ids of tasks this process submitted and that have not ended: their
               values arrive with ``DONE`` without asking.
``_present``   ids the node said exist somewhere in the cluster (``PRESENT``, the answer to
               a ``LOCATE`` of ``wait(fetch_local=False)``), whose values need not be here;
               ``_locators`` waits on them as ``_waiters`` waits on values.

Events (driver only) are built here from what the node says and published to `nbdist.events`.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from nbdist import events as ev
from nbdist.backends.base import current as _current
from nbdist.driver import records
from nbdist.driver.client_parts import (
    ControlRequests,
    Flag,
    Lease,
    TaskContext,
    Waiter,
    WaitTable,
    encode_args,
    raise_control_error,
)
from nbdist.driver.direct import DirectCalls
from nbdist.exceptions import (
    ClusterError,
    GetTimeoutError,
    NbdistError,
    ObjectLostError,
    ObjectStoreFullError,
    RuntimeNotInitializedError,
    SerializationError,
)
from nbdist.ids import IdSource
from nbdist.objects import store
from nbdist.objects.refs import ObjectRef
from nbdist.wire import links, serialization, transport
from nbdist.wire import protocol as P

log = logging.getLogger(__name__)

FLUSH_S = 0.02
BURST_S = 0.001  # a submission this soon after the one before joins a batch (see `submit`)
PROGRESS_S = 0.05  # a pending get/wait reports progress at most this often
_T = time.time


class Settable(Protocol):
    """What `CoreClient.pump` may stop on: a `Flag`, a `threading.Event`, or a worker's
    "a call is queued" (`nbdist.daemons.worker`)."""

    def is_set(self) -> bool: ...


class CoreClient:
    def __init__(self, sock: Any, info: dict[str, Any], mode: str) -> None:
        self.mode = mode
        self.info = info
        self.client_no: int = info["client_no"]
        self.job: int = self.client_no if mode == P.KIND_DRIVER else 0
        self.node_id: str = info["node_id"]
        self.node_pid: int = info["node_pid"]
        self.shm_dir: str = info["shm_dir"]
        cfg = info["config"]
        self.inline_max: int = cfg["inline_max_bytes"]
        self.capacity: int = cfg["object_store_memory"]
        self.log_to_driver: bool = cfg.get("log_to_driver", True)
        self.ids = IdSource(self.client_no)
        self.ctx = TaskContext()
        self.gpu_ids: list[int] = []  # a worker's: the GPUs of its task or actor
        # Reentrant: a ref or actor handle the garbage collector frees while this thread holds
        # the lock (collection can start at any allocation) releases its hold under it again.
        self._lock = threading.RLock()
        self._send_lock = threading.Lock()
        self._refs: dict[int, int] = {}
        # (sign, id) holds and releases; also PUT messages (see `send`)
        self._ref_ops: collections.deque[tuple] = collections.deque()
        self._cache: dict[int, tuple] = {}
        self._mapped: dict[int, memoryview] = {}
        self._leases: dict[int, Lease] = {}
        where = info.get("arena")
        self.arena = store.attach(where[0], where[1]) if where else None
        self._waiters = WaitTable()
        self._locators = WaitTable()
        self._present: set[int] = set()
        self._expected: set[int] = set()
        self._requested: set[int] = set()
        self._fetching: set[int] = set()
        # Says more when the node goes away unexpectedly (e.g. the end of its log).
        self.close_hint: Callable[[], str] | None = None
        self._fns: set[int] = set()
        # Driver: names of its unfinished tasks, those the node said have started, and the
        # submitter tags of those that have one (`nbdist.driver.records` keeps them current).
        self.task_names: dict[int, str] = {}
        self.running_tasks: set[int] = set()
        self._control = ControlRequests()
        self._wait_ids = itertools.count(1)
        self.closed = False
        self.close_reason = ""
        self.on_other: Callable[[tuple], None] | None = None
        # Set while a task of this driver is paused in the debugger (`nbdist.driver.debug`):
        # a thread blocked in get/wait calls it, so the prompt shows where the program waits.
        self.attention: Callable[[CoreClient], None] | None = None
        self.worker: Any = None  # in a worker process, its Worker (the runtime context's)
        self.task_tags: dict[int, str] = {}
        self.publish = ev.publish if mode == P.KIND_DRIVER else _no_publish
        self.direct: DirectCalls | None = None
        self.conn = self._connection(sock)
        self._flusher = threading.Thread(target=self._flush_loop, name="nbdist-flush",
                                         daemon=True)
        self._flush_soon = threading.Event()  # set: a worker waits for what is queued
        self._last_submit = 0.0  # monotonic time of the last submission
        self._batching = False  # SUBMITs wait in ``_ref_ops`` and the flusher was woken
        self.batched_submissions = 0  # submissions sent in a batch rather than alone

    def _connection(self, sock: Any) -> transport.Connection:
        return transport.Connection(sock, self._on_messages, self._on_close,
                                    name=f"nbdist-{self.mode}-reader")

    def start(self, reader_thread: bool = True) -> None:
        """Start receiving. Without a reader thread (workers), threads that need messages
        read them themselves, one at a time (`pump`)."""
        self.self_read = not reader_thread
        if self.mode == P.KIND_DRIVER:
            # The node and its worker pool were up before this driver joined.
            now = _T()
            info = self.info
            self.publish(ev.NodeUp(now, self.node_id, info.get("address", ""),
                                   dict(info.get("resources", {}))))
            for pid in info.get("workers", ()):
                self.publish(ev.WorkerUp(now, self.node_id, pid))
        if reader_thread:
            self.conn.start()
        self._flusher.start()

    self_read = False

    def enable_direct(self, secret: bytes) -> None:
        """Call actors on this node over direct links (a driver; see `nbdist.driver.direct`)."""
        sock_dir = links.socket_dir(self.info)
        if self.mode == P.KIND_DRIVER and sock_dir and self.info["config"].get(
                "direct_actor_calls", True):
            self.direct = DirectCalls(self, sock_dir, secret)

    def pump(self, timeout: float | None, until: Settable | None = None) -> bool:
        """Read and apply incoming messages on this thread if no other thread is reading;
        returns False if the connection is closed. With ``until``: not if it is set by the
        time this thread may read (the thread that read before may have delivered it)."""
        conn = self.conn
        if not conn.read_lock.acquire(timeout=-1 if timeout is None else timeout):
            return not conn.closed
        try:
            if until is not None and until.is_set():
                return True
            return conn.pump(timeout)
        finally:
            conn.read_lock.release()

    def _wait_event(self, event: Flag | threading.Event, timeout: float | None,
                    attend: bool = False) -> bool:
        # A submission after a wait starts a new burst: sent at once, so a loop of submit and
        # get (a round trip each) never leaves a task waiting for the flusher.
        self._last_submit = 0.0
        if event.is_set():
            return True
        if self._batching:
            self.send([])  # what this waits for may be a task still in the batch
        if self.self_read:
            return self._pump_until(event, timeout, attend)
        self.conn.lend()
        try:
            return self._pump_until(event, timeout, attend)
        finally:
            self.conn.give_back()

    def _pump_until(self, event: Flag | threading.Event, timeout: float | None,
                    attend: bool = False) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not event.is_set():
            if attend and self.attention is not None:  # a get/wait, not a control call
                self._attend()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            # Short slices: another thread may be reading for both of us meanwhile.
            step = 0.05 if left is None else min(left, 0.05)
            if not self.pump(step, event):
                return event.is_set()
        return True

    def _attend(self) -> None:
        """Let a paused task's debugger have the prompt; another thread reads meanwhile."""
        hook = self.attention
        if hook is None or threading.current_thread() is not threading.main_thread():
            return
        if not self.self_read:
            self.conn.give_back()
        try:
            hook(self)
        finally:
            if not self.self_read:
                self.conn.lend()

    # ------------------------------------------------------------ sending
    def send(self, msgs: list[Any]) -> None:
        with self._send_lock:
            ops = self._ref_ops
            if ops:
                # Holds and releases (sign, id); registrations of direct results (PUT
                # messages, see `nbdist.driver.direct`) and batched submissions (REGISTER_FN,
                # SUBMIT); all in the order they were queued. Unpins may go last.
                self._batching = False  # before the queue is emptied: see `submit`
                head: list[Any] = []
                batch: list[tuple[int, int]] = []
                unpins: list[int] = []
                while ops:
                    op = ops.popleft()
                    kind = op[0]
                    if kind == 1 or kind == -1:
                        batch.append(op)
                    elif kind == P.UNPIN:
                        unpins.append(op[1])
                    else:
                        if batch:
                            head.append((P.REFS, batch))
                            batch = []
                        head.append(op)
                if batch:
                    head.append((P.REFS, batch))
                if unpins:
                    head.append((P.UNPIN, unpins))
                msgs = [*head, *msgs]
            try:
                self.conn.send(msgs)
            except OSError as exc:
                raise ClusterError(
                    f"Lost the connection to the nbdist node ({self.close_reason or exc}). "
                    "Call nbdist.shutdown() and nbdist.init() to start a new cluster."
                ) from None

    def _flush_loop(self) -> None:
        while not self.closed:
            if self._flush_soon.wait(FLUSH_S):
                self._flush_soon.clear()
            if self._ref_ops and not self.closed:
                try:
                    self.send([])
                except NbdistError:
                    return

    # ------------------------------------------------------------ references
    def _hold(self, oid: int, add: bool) -> None:
        with self._lock:
            count = self._refs.get(oid, 0)
            self._refs[oid] = count + 1
        if count == 0 and add:
            self._ref_ops.append((1, oid))

    def _release(self, oid: int) -> None:
        with self._lock:
            count = self._refs.get(oid, 0) - 1
            if count > 0:
                self._refs[oid] = count
                return
            self._refs.pop(oid, None)
            self._cache.pop(oid, None)
            self._leases.pop(oid, None)
            self._mapped.pop(oid, None)
            self._requested.discard(oid)
            self._present.discard(oid)
        direct = self.direct
        if direct is not None and direct.forget(oid):
            return
        self._ref_ops.append((-1, oid))

    def holds(self, oid: int) -> bool:
        return oid in self._refs

    # For `nbdist.driver.direct`: a hold as a ref object takes and its release; where a value is;
    # ``(sign, id)`` or a PUT queued for the node, in order (see `send`), and sent now.
    def hold(self, oid: int) -> None:
        self._hold(oid, True)

    release = _release

    def cached(self, oid: int) -> tuple | None:
        return self._cache.get(oid)

    def queue_ref_op(self, op: tuple) -> None:
        self._ref_ops.append(op)

    def flush_ref_ops(self) -> None:
        if self._ref_ops:
            self.send([])

    def flush_ref_ops_soon(self) -> None:
        """Have the flusher send the queued ref messages now, not within ``FLUSH_S``: from
        the thread that reads answers, which must not block on a send itself."""
        self._flush_soon.set()

    # ------------------------------------------------------------ functions and tasks
    def ensure_function(self, fid: int, pickled: bytes) -> list[Any]:
        if fid in self._fns:
            return []
        self._fns.add(fid)
        return [(P.REGISTER_FN, fid, pickled)]

    def submit(self, fid: int, pickled: bytes | None, name: str, args: Sequence[Any],
               kwargs: dict[str, Any], num_returns: int, resources: tuple | None,
               max_retries: int, retry_exceptions: Any, actor_id: int = 0,
               method: str | None = None, extra: dict[str, Any] | None = None,
               task_id: int = 0) -> tuple[int, list[ObjectRef]]:
        blob, deps, contained, keep = encode_args(args, kwargs, f"{name!r}", self.inline_max,
                                                  self.put)
        # (A streaming task comes with an id of its region, `nbdist.driver.generators`.)
        task_id = task_id or self.ids.block(1 + num_returns)
        ctx = self.ctx
        job = self.job or ctx.job
        spec = (task_id, fid, name, blob, deps, num_returns, resources, max_retries,
                retry_exceptions, actor_id, method, ctx.task_id, contained, job, extra)
        ret_ids = range(task_id + 1, task_id + 1 + num_returns)
        self._expected.update(ret_ids)
        self.task_names[task_id] = name
        refs = [ObjectRef(rid, False) for rid in ret_ids]
        if self.mode == P.KIND_DRIVER:
            tag = ev.current_submitter()
            if tag is not None:
                self.task_tags[task_id] = tag
            mark = ev.current_library_call()
            if mark is None:
                ev.publish_later(ev.TaskSubmitted, (_T(), task_id, name, deps, ret_ids, None,
                                                    actor_id or None, tag))
            else:  # one of nbdist's libraries made this call (`nbdist.events.marks`)
                ev.publish_later(ev.TaskSubmitted, (_T(), task_id, name, deps, ret_ids, None,
                                                    actor_id or None, tag, tuple(mark)))
        direct = self.direct
        if direct is not None:
            if actor_id and method != P.ACTOR_INIT and direct.route(spec, contained):
                return task_id, refs
            for dep in deps:
                direct.escape(dep)  # the node resolves it
        msgs = self.ensure_function(fid, pickled) if pickled is not None else []
        msgs.append((P.SUBMIT, spec))
        now = time.monotonic()
        if now - self._last_submit < BURST_S:
            # Within a burst: queued, in order with holds and releases, for the flusher (or
            # the next send or wait). ``_batching`` is cleared before `send` empties the
            # queue, so a submission that finds it set was queued before that emptying.
            self._ref_ops.extend(msgs)
            self.batched_submissions += 1
            if not self._batching:
                self._batching = True
                self._flush_soon.set()
        else:
            self.send(msgs)
        self._last_submit = now
        del keep
        return task_id, refs

    # ------------------------------------------------------------ objects
    def put(self, value: Any) -> ObjectRef:
        if isinstance(value, ObjectRef):
            raise TypeError("put() of an ObjectRef is not allowed: pass the ref itself.")
        try:
            parts, size, contained = serialization.dumps(value)
        except Exception as exc:
            raise SerializationError(
                f"Could not serialize the value given to put() (type {type(value).__name__}):"
                f" {exc}") from exc
        oid = self.ids.next()
        if size <= self.inline_max:
            loc: tuple = (oid, serialization.join(parts), 0)
        else:
            if size > self.capacity:
                raise ObjectStoreFullError(
                    f"The value ({size / 2**20:.1f} MiB) is larger than the whole object store "
                    f"({self.capacity / 2**20:.1f} MiB). Start the cluster with a larger "
                    "object_store_memory, or split the value.")
            offset = self.write_object(oid, parts, size)
            if offset >= 0:
                loc = (oid, None, size, (), offset)
                self._leases[oid] = Lease(self._ref_ops, offset)  # counted by the node at PUT
            else:
                loc = (oid, None, size)
        ref = ObjectRef(oid, False)
        self._cache[oid] = loc
        self.send([(P.PUT, oid, loc[1], loc[2], contained, P.loc_offset(loc))])
        if self.mode == P.KIND_DRIVER:
            ev.publish_later(ev.ObjectCreated, (_T(), oid, size, self.node_id,
                                                self.client_no, None, loc[1] is None))
        return ref

    def write_object(self, oid: int, parts: list[Any], size: int) -> int:
        """Get room for a large value from the node and copy it there: its offset in the
        arena, or -1 when the node had no range for it (then it is a file)."""
        offset = self.reserve(oid, size)
        if offset >= 0 and self.arena is not None:
            self.arena.write(offset, parts, size)
            return offset
        store.write(self._shm_path(oid), parts, size, self._warm_base())
        return -1

    def with_leases(self, locs: list) -> list:
        """Locations the node just sent, each in the arena with its `_Lease` appended (the
        node counted one per location sent)."""
        ops = self._ref_ops
        return [loc + (Lease(ops, loc[4]),) if len(loc) > 4 and loc[4] >= 0 else loc
                for loc in locs]

    def _shm_path(self, oid: int) -> str:
        return os.path.join(self.shm_dir, P.shm_name(self.node_pid, oid))

    def _warm_base(self) -> str:
        return os.path.join(self.shm_dir, P.warm_name(self.node_pid, os.getpid()))

    def value(self, loc: tuple) -> Any:
        """The value at ``loc``: a location this process received from the node (its lease,
        if it is in the arena, either appended by `with_leases` or kept in ``_leases``)."""
        oid, blob, size = loc[0], loc[1], loc[2]
        if blob is not None:
            return serialization.loads(blob)
        if len(loc) > 4 and loc[4] >= 0:
            if self.arena is None:
                raise ObjectLostError(
                    f"Object {oid:x} is in the node's shared-memory arena, which this process "
                    "could not map (see the log of its start).")
            lease = loc[5] if len(loc) > 5 else self._leases.get(oid)
            if lease is None or lease.offset != loc[4]:
                # Not (or no longer) leased here: the node sends a location with a lease.
                loc = self._relocate(oid)
                if len(loc) <= 5:
                    return self.value(loc)
                lease = loc[5]
            return serialization.loads(self.arena.pinned(lease.offset, size, lease))
        view = self._mapped.get(oid)
        if view is None:
            try:
                view = store.map_readonly(self._shm_path(oid))
            except FileNotFoundError:
                # Spilled to disk after this location was sent: the node brings it back.
                return self.value(self._relocate(oid))
            if oid in self._refs:
                self._mapped[oid] = view
        return serialization.loads(view)

    def fetch(self, oids: list[int], timeout: float | None = None,
              coming: bool = False) -> dict[int, tuple]:
        """The locations of ``oids``, which this process need not hold (a direct call's
        arguments, a spilled object), once the node has sent them (within ``timeout``: those
        it had). ``coming``: a direct call's arguments, which the caller holds, so each is
        stored or on its way to the node (the caller's PUT races its call): the node waits for
        an id it does not know yet rather than answer that it is gone."""
        with self._lock:
            self._fetching.update(oids)
        try:
            self._block(oids, len(oids), timeout, coming=coming)
            with self._lock:
                out = {}
                for oid in oids:
                    loc = self._cache.get(oid)
                    if loc is not None:
                        lease = self._leases.get(oid)
                        out[oid] = loc if lease is None else (*loc[:5], lease)
                return out
        finally:
            with self._lock:
                for oid in oids:
                    self._fetching.discard(oid)
                    if oid not in self._refs:
                        self._cache.pop(oid, None)
                        self._leases.pop(oid, None)
                        self._requested.discard(oid)

    def _relocate(self, oid: int) -> tuple:
        with self._lock:
            self._cache.pop(oid, None)
            self._leases.pop(oid, None)
            self._requested.discard(oid)
        loc = self.fetch([oid], 60.0).get(oid)
        if loc is None:
            raise ObjectLostError(f"Object {oid:x} could not be found in the object store.")
        return loc

    def _request(self, oids: Iterable[int], coming: bool = False) -> None:
        ask = [o for o in oids if o not in self._expected and o not in self._requested]
        if ask:
            self._requested.update(ask)
            self.send([(P.GET_REQ, ask, True) if coming else (P.GET_REQ, ask)])

    def _here_or_present(self, oid: int) -> bool:
        return oid in self._cache or oid in self._present

    def _block(self, oids: list[int], need: int, timeout: float | None,
               progress: tuple[int, int, int] | None = None, coming: bool = False,
               anywhere: bool = False) -> bool:
        """Wait until ``need`` of ``oids`` are in the cache; False on timeout.

        ``progress`` = (wait_id, ready before, total): publish `WaitProgress` as values arrive,
        at most every `PROGRESS_S`. ``coming``: the node is to wait for an id it does not know
        yet rather than answer that it is gone. ``anywhere``: until they exist somewhere in
        the cluster, here or not (``LOCATE``; nothing is copied here)."""
        waiter = Waiter(need)
        if progress is not None:
            waiter.wait_id, waiter.base, waiter.total = progress
            waiter.last = time.monotonic()
        if anywhere:
            with self._lock:
                self._locators.add(oids, waiter, self._here_or_present)
            self._locate(oids)
            try:
                ok = self._wait_event(waiter.event, timeout, attend=True)
            finally:
                with self._lock:
                    self._locators.remove(oids, waiter)
            if self.closed and not ok:
                raise ClusterError(f"The nbdist cluster went away: {self.close_reason}")
            return ok
        with self._lock:
            self._waiters.add(oids, waiter, self._cache.__contains__)
        self._request([o for o in oids if o not in self._cache], coming)
        blocked = self.mode == P.KIND_WORKER and self.ctx.task_id and not waiter.event.is_set()
        if blocked:
            self.send([(P.BLOCKED, self.ctx.task_id)])
        try:
            ok = self._wait_event(waiter.event, timeout, attend=True)
        finally:
            if blocked:
                self.send([(P.UNBLOCKED, self.ctx.task_id)])
            with self._lock:
                self._waiters.remove(oids, waiter)
        if self.closed and (not ok or any(o not in self._cache for o in oids)):
            raise ClusterError(f"The nbdist cluster went away: {self.close_reason}")
        return ok

    def get(self, refs: Sequence[ObjectRef], timeout: float | None) -> list[Any]:
        self._last_submit = 0.0  # the next submission starts a burst (see `_wait_event`)
        oids = [r.id for r in refs]
        cache = self._cache
        missing = [o for o in oids if o not in cache]
        if missing:
            wait_id = 0
            if self.mode == P.KIND_DRIVER:
                wait_id = next(self._wait_ids)
                ev.publish_later(ev.WaitBegun, (_T(), wait_id, "get", tuple(oids),
                                                len(oids), len(oids) - len(missing),
                                                self._tag(), ev.current_library_call()))
            ok = False
            try:
                ok = self._block(missing, len(missing), timeout, (
                    wait_id, len(oids) - len(missing), len(oids)) if wait_id else None)
            finally:  # also when interrupted: the views and %nbdist why see it end
                if wait_id:
                    ready = sum(1 for o in oids if o in cache)
                    ev.publish_later(ev.WaitDone, (_T(), wait_id, ready, len(oids), not ok))
            if not ok:
                raise GetTimeoutError(
                    f"get() timed out after {timeout} s with {len(missing)} of {len(oids)} "
                    "values not ready. Raise the timeout, or use wait() to take what is ready.")
        out = []
        for oid in oids:
            loc = cache.get(oid)
            if loc is None:  # released meanwhile by another thread's last ref: ask again
                self._requested.discard(oid)
                self._block([oid], 1, timeout)
                loc = cache[oid]
            out.append(self.value(loc))
        return out

    def wait(self, refs: Sequence[ObjectRef], num_returns: int, timeout: float | None,
             fetch_local: bool = True) -> tuple[list[ObjectRef], list[ObjectRef]]:
        """Ray's ``wait``: with ``fetch_local`` an object is ready once its value is on this
        node (it is fetched); without, once it exists anywhere in the cluster."""
        if not fetch_local:
            return self._wait_anywhere(refs, num_returns, timeout)
        self._last_submit = 0.0
        cache = self._cache
        ready_now = sum(1 for r in refs if r.id in cache)
        if ready_now < num_returns and timeout != 0:
            wait_id = 0
            if self.mode == P.KIND_DRIVER:
                wait_id = next(self._wait_ids)
                self.publish(ev.WaitBegun(_T(), wait_id, "wait",
                                          tuple(r.hex() for r in refs), num_returns, ready_now,
                                          self._tag(), ev.current_library_call()))
            missing = [r.id for r in refs if r.id not in cache]
            ok = False
            try:
                ok = self._block(missing, num_returns - ready_now, timeout,
                                 (wait_id, ready_now, len(refs)) if wait_id else None)
            finally:  # also when interrupted (as get)
                if wait_id:
                    n_ready = sum(1 for r in refs if r.id in cache)
                    self.publish(ev.WaitDone(_T(), wait_id, n_ready, len(refs), not ok))
        elif timeout == 0:
            self._request([r.id for r in refs if r.id not in cache])
        ready: list[ObjectRef] = []
        rest: list[ObjectRef] = []
        for r in refs:
            if r.id in cache and len(ready) < num_returns:
                ready.append(r)
            else:
                rest.append(r)
        return ready, rest

    def _wait_anywhere(self, refs: Sequence[ObjectRef], num_returns: int,
                       timeout: float | None) -> tuple[list[ObjectRef], list[ObjectRef]]:
        self._last_submit = 0.0
        known = self._here_or_present
        ready_now = sum(1 for r in refs if known(r.id))
        if ready_now < num_returns and timeout != 0:
            wait_id = 0
            if self.mode == P.KIND_DRIVER:
                wait_id = next(self._wait_ids)
                self.publish(ev.WaitBegun(_T(), wait_id, "wait",
                                          tuple(r.hex() for r in refs), num_returns, ready_now,
                                          self._tag(), ev.current_library_call()))
            ok = False
            try:
                ok = self._block([r.id for r in refs if not known(r.id)],
                                 num_returns - ready_now, timeout,
                                 (wait_id, ready_now, len(refs)) if wait_id else None,
                                 anywhere=True)
            finally:
                if wait_id:
                    n_ready = sum(1 for r in refs if known(r.id))
                    self.publish(ev.WaitDone(_T(), wait_id, n_ready, len(refs), not ok))
        elif timeout == 0:
            self._locate([r.id for r in refs])
        ready: list[ObjectRef] = []
        rest: list[ObjectRef] = []
        for r in refs:
            if len(ready) < num_returns and known(r.id):
                ready.append(r)
            else:
                rest.append(r)
        return ready, rest

    def _locate(self, oids: Iterable[int]) -> None:
        """Ask the node to say when ``oids`` exist in the cluster (those not known to yet; the
        results of this process's unfinished tasks come with their end anyway, and a direct
        call's are not the node's to know)."""
        known, expected = self._here_or_present, self._expected
        ask = [o for o in oids if not known(o) and o not in expected]
        if ask:
            self.send([(P.LOCATE, ask)])

    def _present_at(self, oids: list[int]) -> None:
        """``PRESENT``: these objects exist in the cluster."""
        found: list[Waiter] = []
        with self._lock:
            for oid in oids:
                if oid in self._refs:
                    self._present.add(oid)
                found.extend(self._locators.pop(oid))
        self._count_down(found)

    def _tag(self) -> str | None:
        return ev.current_submitter()

    def unfinished_tasks(self, tag: str) -> list[int]:
        """Ids of this driver's unfinished tasks submitted under ``tag`` (nested included)."""
        return [tid for tid, t in list(self.task_tags.items()) if t == tag]

    # ------------------------------------------------------------ control
    def reserve(self, oid: int, size: int) -> int:
        """Ask the node for room for an object about to be written to shared memory (it
        spills others to disk if needed); ObjectStoreFullError if there is none. Returns the
        range of the arena granted, or -1: write a file."""
        offset = self.control("reserve", (oid, size, self.arena is not None), timeout=120.0)
        return offset if isinstance(offset, int) else -1

    def control(self, op: str, args: Any = None, timeout: float | None = 30.0) -> Any:
        req_id, slot = self._control.open()
        self.send([(P.CONTROL, req_id, op, args)])
        if not self._wait_event(slot[0], timeout):
            self._control.abandon(req_id)
            raise ClusterError(f"The cluster did not answer {op!r} within {timeout} s.")
        ok, result = slot[1], slot[2]
        if not ok:
            raise_control_error(result)
        return result

    def step(self, on: bool | None, release: int | str, wait: bool) -> dict[str, Any]:
        """Step-through mode (`nbdist.driver.stepping`): the node's answer to a command."""
        direct = self.direct
        if on and direct is not None:
            direct.stepping = True  # before the node holds: no call may slip past on a link
        reply: dict[str, Any] = self.control("step", (on, release, wait),
                                             timeout=None if wait else 30.0)
        if not reply["on"] and direct is not None:
            direct.stepping = False
        return reply

    def ref_count(self, oid: int) -> int:
        """How many refs to ``oid`` this process holds."""
        return self._refs.get(oid, 0)

    def cancel(self, oid: int, force: bool, recursive: bool = True) -> None:
        direct = self.direct
        if direct is not None and direct.cancel(direct.task_of(oid), force, recursive):
            return
        self.send([(P.CANCEL, oid, force, recursive)])

    def cancel_task(self, task_id: int, force: bool) -> None:
        direct = self.direct
        if direct is not None and direct.cancel(task_id, force):
            return
        # The node finds a task from any of its return ids; every task has id + 1.
        self.send([(P.CANCEL, task_id + 1, force)])

    def kill_actor(self, actor_id: int, no_restart: bool) -> None:
        self.send([(P.KILL_ACTOR, actor_id, no_restart)])

    # ------------------------------------------------------------ incoming
    def _store(self, loc: tuple) -> None:
        oid = loc[0]
        offset = P.loc_offset(loc)
        # The node counted a lease for a location in the arena: one lease object per location
        # received, given back at once if the location is not kept.
        lease = Lease(self._ref_ops, offset) if offset >= 0 else None
        with self._lock:
            if oid in self._refs or oid in self._fetching:
                if lease is None:
                    self._cache[oid] = loc[:3]
                    self._leases.pop(oid, None)
                else:
                    self._cache[oid] = (oid, None, loc[2], (), offset)
                    self._leases[oid] = lease
            found = self._waiters.pop(oid)
            located = self._locators.pop(oid)
        if found:
            self._count_down(found)
        if located:
            self._count_down(located)

    def _count_down(self, found: Iterable[Waiter]) -> None:
        for w in found:
            w.remaining -= 1
            if w.remaining <= 0:
                w.event.set()
            elif w.wait_id:
                now = time.monotonic()
                if now - w.last >= PROGRESS_S:
                    w.last = now
                    self.publish(ev.WaitProgress(_T(), w.wait_id,
                                                 w.base + w.need - w.remaining, w.total))

    def _on_messages(self, msgs: list[Any]) -> None:
        for msg in msgs:
            op = msg[0]
            if op == P.DONE:
                self.task_done(msg)
            elif op == P.OBJ:
                self._requested.discard(msg[1][0])
                self._store(msg[1])
            elif op == P.PRESENT:
                self._present_at(msg[1])
            elif op == P.STARTED:
                if self.mode == P.KIND_DRIVER:
                    records.tasks_started(self, msg[1], msg[2])
            elif op == P.LOG:
                records.output(self, msg)
            elif op == P.EVENT:
                records.node_events(self, msg[1])
            elif op == P.CONTROL_REPLY:
                self._control.answer(msg[1], msg[2], msg[3])
            elif self.on_other is not None:
                self.on_other(msg)

    def task_done(self, msg: tuple, from_link: bool = False) -> None:
        """A DONE from the node, or from a direct link (``from_link``)."""
        _, task_id, ok, locs, t0, t1, pid, *where = msg
        name = self.task_names.pop(task_id, "?")
        tag = self.task_tags.pop(task_id, None)
        expected = self._expected
        for loc in locs:
            # Stored before it stops being expected: a get meanwhile finds it one way or the
            # other, never asks the node (which may not know a direct call's result).
            self._store(loc)
            expected.discard(loc[0])
        if self.mode == P.KIND_DRIVER:
            records.task_ended(self, task_id, name, tag, ok, locs, t0, t1, pid,
                               where[0] if where else "")
        if self.direct is not None:  # after the records: it may publish that one is freed
            self.direct.ended(msg, from_link)

    def _on_close(self, error: BaseException | None) -> None:
        was_closing = self.closed
        self.closed = True
        self.close_reason = f"{error}" if error else "the node daemon closed the connection"
        if not was_closing and self.close_hint is not None:
            try:
                self.close_reason += self.close_hint()
            except Exception:
                pass
        with self._lock:
            waiters = self._waiters.pop_all() + self._locators.pop_all()
        for w in waiters:
            w.event.set()
        self._control.fail_all(f"lost the cluster: {self.close_reason}")
        if self.on_other is not None:
            self.on_other((P.EXIT,))

    def close(self) -> None:
        if not self.closed:
            try:
                self.send([])
            except NbdistError:
                pass
        self.closed = True
        if self.direct is not None:
            self.direct.close()
        self.conn.close()
        if self.mode == P.KIND_DRIVER and self.arena is not None:
            store.detach(self.arena.path)


def _no_publish(event: ev.Event) -> None:
    return None


# The process's client lives in the runtime context (`backend.current`): set by init() in a
# driver, by the worker main in a worker.
_auto_init: Callable[[], CoreClient] | None = None


def set_client(client: CoreClient | None) -> None:
    _current.client = client


def current() -> CoreClient:
    client = _current.client
    if client is None or client.closed:
        if client is None and _auto_init is not None:
            return _auto_init()
        if client is not None and client.closed:
            raise ClusterError(
                f"The nbdist cluster is gone ({client.close_reason}). Call nbdist.shutdown() "
                "and then nbdist.init() to start a new one.")
        raise RuntimeNotInitializedError(
            "nbdist is not initialized: call nbdist.init() first.")
    return client


def set_auto_init(fn: Callable[[], CoreClient] | None) -> None:
    global _auto_init
    _auto_init = fn

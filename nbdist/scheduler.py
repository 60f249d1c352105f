"""The node's scheduler and object directory: a state machine with no I/O (layer L1).

``NodeState`` is driven by the node daemon's loop: every incoming message becomes a method
call (`submit`, `result`, `refs`, `get_request`, `worker_lost` ...). Everything it wants done
goes out through the ``NodeIO`` interface it was given: ``send(client, msg)``,
``spawn_worker()``, ``kill_worker(worker)``, ``unlink(oid)``, ``to_head(op, args)``. Tests drive it
with a recording NodeIO and no sockets.

State (all owned by the node daemon's single thread):

``objects``   id -> Obj: PENDING until its task ends, then READY (value inline or in a shm file)
              or failed (an error blob). ``count`` is the number of reasons to keep it: each
              client process holding a ref (``Client.holds``), each unfinished task using it as an
              argument or carrying it inside its arguments, each stored object containing it.
              At zero, a finished object is freed (its shm file unlinked).
``tasks``     id -> Task, every task not yet finished (waiting for deps, queued, running).
``ready``     resource shape -> deque of queued plain tasks whose dependencies are ready.
``workers``   the worker processes: idle, busy with one task, blocked in `get` (its CPU given
              back), or dedicated to an actor.
``actors``    id -> Actor: its worker, a FIFO of calls (dispatched strictly in submission order
              as their arguments become ready), the calls in flight, restarts left.

Invariants: a task holds its resources from dispatch to its result, except CPU while its worker
is blocked in `get`; a plain task is on exactly one of: a dependency's waiting list, a ready
queue, a worker. A failed dependency fails its dependents without running them.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Iterable
from typing import Any, Protocol

from . import protocol as P
from .exceptions import (
    ActorDiedError,
    ObjectLostError,
    TaskCancelledError,
    WorkerCrashedError,
)
from .serialization import error_text, error_type_names, system_error_blob

log = logging.getLogger(__name__)

PENDING, READY = 0, 1
CPU_ONLY = (("CPU", 1.0),)


class Client:
    """A connected process (driver or worker) as the scheduler sees it."""

    __slots__ = ("peer", "kind", "client_no", "pid", "holds", "worker", "job", "node_index",
                 "reserved")

    def __init__(self, peer: Any, kind: str, client_no: int, pid: int, job: int) -> None:
        self.peer = peer
        self.kind = kind
        self.client_no = client_no
        self.pid = pid
        self.holds: set[int] = set()
        self.worker: Worker | None = None
        self.job = job
        self.node_index = 0  # for a peer node (kind "node"): its index
        self.reserved: dict[int, int] = {}  # store space granted for objects it will write


class Worker:
    __slots__ = ("pid", "client", "state", "task", "actor", "fns", "blocked", "idle_since")

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.client: Client | None = None
        self.state = "idle"  # idle | busy | actor | dead
        self.task: Task | None = None
        self.actor: Actor | None = None
        self.fns: set[int] = set()
        self.blocked = False
        self.idle_since = time.monotonic()


class Task:
    __slots__ = (
        "spec", "id", "owner", "missing", "retries_left", "worker", "held", "gpus",
        "cancelled", "finished", "attempt", "shape", "ready", "dispatched_at", "remote",
        "no_forward",
    )

    def __init__(self, spec: tuple, owner: Client) -> None:
        self.spec = spec
        self.id: int = spec[P.S_TASK_ID]
        self.owner = owner
        self.missing = 0
        self.retries_left: int = spec[P.S_MAX_RETRIES]
        self.worker: Worker | None = None
        self.held: tuple[tuple[str, float], ...] = ()
        self.gpus: list[int] = []
        self.cancelled = False
        self.finished = False
        self.attempt = 0
        res = spec[P.S_RESOURCES]
        self.shape: tuple[tuple[str, float], ...] = CPU_ONLY if res is None else res
        self.ready = False
        self.dispatched_at = 0.0
        self.remote = 0  # index of the node running it for us (0: here)
        self.no_forward = False  # forwarded here by another node: run it here

    @property
    def return_ids(self) -> range:
        return range(self.id + 1, self.id + 1 + self.spec[P.S_NRET])


class Obj:
    __slots__ = ("state", "blob", "shm_size", "count", "subscribers", "waiting", "contained",
                 "error", "owner_job", "spilled", "used")

    def __init__(self) -> None:
        self.state = PENDING
        self.blob: bytes | None = None
        self.shm_size = 0
        self.count = 0
        self.subscribers: list[Client] = []
        self.waiting: list[Task] = []
        self.contained: tuple[int, ...] = ()
        self.error = False
        self.owner_job = 0
        self.spilled: str | None = None  # its file on disk while it is spilled
        self.used = 0  # when it was last needed (the store's clock): spill the oldest first


class Actor:
    __slots__ = ("id", "spec", "state", "worker", "queue", "inflight", "restarts_left",
                 "count", "detached", "killed", "init_error", "name", "namespace", "held",
                 "gpus", "job", "restarts", "remote", "host_for")

    def __init__(self, spec: tuple, job: int) -> None:
        extra = spec[P.S_EXTRA] or {}
        self.id: int = spec[P.S_ACTOR]
        self.spec = spec
        self.state = "pending"  # pending | alive | restarting | dead
        self.worker: Worker | None = None
        self.queue: collections.deque[Task] = collections.deque()
        self.inflight: dict[int, Task] = {}
        self.restarts_left: int = extra.get("max_restarts", 0)
        self.restarts = 0
        self.count = 0
        self.detached = extra.get("lifetime") == "detached"
        self.killed = False
        self.init_error: bytes | None = None
        self.name: str | None = extra.get("name")
        self.namespace: str = extra.get("namespace") or ""
        self.held: tuple[tuple[str, float], ...] = ()
        self.gpus: list[int] = []
        self.job = job
        # The node whose process runs it, when that is another node: for the owner's record
        # of an actor placed there, and for a stand-in (routes calls to the actor's owner).
        self.remote = 0
        self.host_for = 0  # runs here for its owner, node `host_for`

    @classmethod
    def stand_in(cls, actor_id: int, index: int) -> Actor:
        """Routes calls to an actor owned by node ``index``, in the order they were made."""
        actor = cls.__new__(cls)
        actor.id = actor_id
        actor.spec = ()
        actor.state = "remote"
        actor.worker = None
        actor.queue = collections.deque()
        actor.inflight = {}
        actor.restarts_left = actor.restarts = actor.count = 0
        actor.detached = actor.killed = False
        actor.init_error = None
        actor.name = None
        actor.namespace = ""
        actor.held = ()
        actor.gpus = []
        actor.job = 0
        actor.remote = index
        actor.host_for = 0
        return actor


class NodeIO(Protocol):
    node_id: str
    node_pid: int

    def send(self, client: Client, msg: tuple) -> None: ...
    def spawn_worker(self) -> Worker | None: ...
    def kill_worker(self, worker: Worker, graceful: bool = False) -> None: ...
    def unlink(self, oid: int) -> None: ...
    def interrupt_worker(self, worker: Worker) -> None: ...
    def to_head(self, op: str, args: Any) -> None: ...
    def resources_changed(self) -> None: ...
    def forward(self, index: int, spec: tuple, dep_locs: list) -> None: ...
    def spill(self, oid: int, size: int) -> str | None: ...
    def restore(self, oid: int, path: str) -> bool: ...
    def remove_spill(self, path: str) -> None: ...
    def to_node(self, index: int, msg: tuple) -> None: ...


class NodeState:
    def __init__(self, io: NodeIO, resources: dict[str, float], gpu_ids: list[int],
                 num_cpus: int, max_extra_workers: int, capacity: int) -> None:
        self.io = io
        self.total = dict(resources)
        self.avail = dict(resources)
        self.free_gpus = list(gpu_ids)
        self.num_cpus = num_cpus
        self.max_workers = num_cpus + max_extra_workers
        self.capacity = capacity
        self.store_used = 0
        self.objects: dict[int, Obj] = {}
        self.tasks: dict[int, Task] = {}
        self.ready: dict[tuple, collections.deque[Task]] = {}
        self.workers: dict[int, Worker] = {}
        self.idle: list[Worker] = []
        self.actors: dict[int, Actor] = {}
        self.pending_actors: collections.deque[Actor] = collections.deque()
        self.fns: dict[int, bytes] = {}
        self.jobs: dict[int, Client] = {}
        self.need_dispatch = False
        # Notices batched for up to NOTICE_S; a task that ends first needs none (DONE says it).
        self.started: dict[Client, dict[int, int]] = {}
        self.freed: dict[int, list[int]] = {}
        self.spawning = 0
        self._dead_reasons: dict[int, str] = {}
        # Other nodes, as the head last described them (index -> total, available, alive).
        self.node_index: int = getattr(io, "node_index", 1)
        self.remote: dict[int, dict[str, Any]] = {}
        self.fetching: set[int] = set()  # objects asked of their owner node
        self.borrowed: dict[int, int] = {}  # oid -> owner node holding it for us
        self.lost_nodes: set[int] = set()
        # Where nodes can join (a cluster started by `nbdist start`), a task no node can run
        # waits this long for one that can before it fails; parked: task id -> deadline.
        self.infeasible_wait = 0.0
        self.parked: dict[int, float] = {}
        # Memory pressure: shared memory holds at most `capacity` bytes (objects plus space
        # granted to writers); past that the least recently needed objects go to disk, up to
        # `spill_limit` bytes there (0: no limit), and come back when needed.
        self.reserved_total = 0
        self.spilled_used = 0
        self.spill_limit = 0
        self.spill_count = 0
        self.restore_count = 0
        self.clock = 0

    # ---------------------------------------------------------------- clients
    def client_joined(self, client: Client) -> None:
        if client.kind == P.KIND_DRIVER:
            self.jobs[client.client_no] = client

    def client_left(self, client: Client) -> None:
        for size in client.reserved.values():
            self.reserved_total -= size
        client.reserved = {}
        if client.kind == P.KIND_DRIVER:
            self.jobs.pop(client.client_no, None)
            for actor in list(self.actors.values()):
                if actor.job == client.client_no and not actor.detached:
                    self._actor_gone(actor, "its driver exited", no_restart=True)
        holds = client.holds
        client.holds = set()
        for oid in holds:
            self.decref(oid)

    # ---------------------------------------------------------------- refcounts
    def incref(self, oid: int) -> None:
        obj = self.objects.get(oid)
        if obj is not None:
            obj.count += 1
            return
        actor = self.actors.get(oid)
        if actor is not None:
            actor.count += 1
            return
        # A ref whose object is gone (or not yet known): keep a pending slot so counts balance.
        obj = Obj()
        obj.count = 1
        self.objects[oid] = obj
        owner = oid >> P.OWNER_SHIFT
        if owner not in (0, self.node_index) and oid not in self.borrowed:
            # Another node's object or actor: it stays alive there while we hold it.
            self.borrowed[oid] = owner
            self.io.to_node(owner, (P.NODE_REFS, [(1, oid)]))

    def decref(self, oid: int) -> None:
        obj = self.objects.get(oid)
        if obj is not None:
            obj.count -= 1
            if obj.count <= 0 and obj.state == READY:
                self._free(oid, obj)
            elif obj.count <= 0 and obj.state == PENDING and not obj.waiting and oid not in self._producing():
                self.objects.pop(oid, None)
                self._unborrow(oid)
            return
        actor = self.actors.get(oid)
        if actor is not None:
            actor.count -= 1
            if actor.count <= 0 and not actor.detached:
                self._maybe_retire(actor)

    def _producing(self) -> set[int]:
        # Only on the rare path of dropping an unknown pending id; cheap enough there.
        out: set[int] = set()
        for t in self.tasks.values():
            out.update(t.return_ids)
        return out

    def refs(self, client: Client, ops: Iterable[tuple[int, int]]) -> None:
        holds = client.holds
        for sign, oid in ops:
            if sign > 0:
                if oid not in holds:
                    holds.add(oid)
                    self.incref(oid)
            elif oid in holds:
                holds.discard(oid)
                self.decref(oid)

    def _unborrow(self, oid: int) -> None:
        owner = self.borrowed.pop(oid, None)
        if owner is not None:
            self.io.to_node(owner, (P.NODE_REFS, [(-1, oid)]))

    def _free(self, oid: int, obj: Obj) -> None:
        if self.objects.get(oid) is not obj:
            # Freed already: storing a value can end the tasks waiting for it (an error
            # result), and their ending can drop its last reference before the store returns.
            return
        del self.objects[oid]
        if self.borrowed:
            self._unborrow(oid)
        if obj.spilled is not None:
            self.spilled_used -= obj.shm_size
            self.io.remove_spill(obj.spilled)
            obj.spilled = None
            obj.shm_size = 0
        if obj.shm_size:
            self.store_used -= obj.shm_size
            self.io.unlink(oid)
        for inner in obj.contained:
            self.decref(inner)
        self.freed.setdefault(obj.owner_job, []).append(oid)

    # ---------------------------------------------------------------- objects
    def put(self, client: Client, oid: int, blob: bytes | None, shm_size: int,
            contained: tuple[int, ...]) -> None:
        obj = self.objects.get(oid)
        if obj is None:
            obj = Obj()
            self.objects[oid] = obj
        obj.owner_job = client.job
        if oid not in client.holds:
            client.holds.add(oid)
            obj.count += 1
        self._unreserve(client, oid)
        self._store(oid, obj, (oid, blob, shm_size), contained)

    def _store(self, oid: int, obj: Obj, loc: tuple, contained: tuple[int, ...]) -> None:
        obj.state = READY
        obj.blob = loc[1]
        obj.shm_size = loc[2]
        if obj.shm_size:
            self.store_used += obj.shm_size
            self.clock += 1
            obj.used = self.clock
            if self.store_used + self.reserved_total > self.capacity:
                self._make_room(0)  # written here without a grant (a copy from another node)
        obj.contained = contained
        for inner in contained:
            self.incref(inner)
        obj.error = obj.blob is not None and obj.blob[:1] in (b"E", b"S")
        for sub in obj.subscribers:
            self.io.send(sub, (P.OBJ, loc))
        obj.subscribers = []
        waiting = obj.waiting
        obj.waiting = []
        for task in waiting:
            task.missing -= 1
            if task.missing == 0:
                self._deps_ready(task)
        if obj.count <= 0:
            self._free(oid, obj)

    def loc(self, oid: int) -> tuple | None:
        obj = self.objects.get(oid)
        if obj is None or obj.state != READY:
            return None
        if obj.shm_size:
            self.clock += 1
            obj.used = self.clock
            if obj.spilled is not None:
                self._restore(oid, obj)
        return (oid, obj.blob, obj.shm_size)

    # ---------------------------------------------------------------- memory pressure
    def reserve(self, client: Client, oid: int, size: int) -> str | None:
        """Grant ``client`` room for an object of ``size`` bytes it is about to write into
        shared memory, spilling others to disk if needed; an error text if there is none."""
        if size > self.capacity:
            return (f"The object ({size / 2**20:.1f} MiB) is larger than the whole object store "
                    f"({self.capacity / 2**20:.1f} MiB). Start the cluster with a larger "
                    "object_store_memory, or split the value.")
        if not self._make_room(size):
            return (f"The object store is full: {size / 2**20:.1f} MiB more do not fit in "
                    f"{self.capacity / 2**20:.1f} MiB ({self.store_used / 2**20:.1f} MiB used), "
                    f"and spilling cannot make room ({self.spilled_used / 2**20:.1f} MiB "
                    "spilled to disk, at its limit or the disk is full). Free some objects "
                    "(drop refs), or give the cluster more object_store_memory.")
        client.reserved[oid] = client.reserved.get(oid, 0) + size
        self.reserved_total += size
        return None

    def _unreserve(self, client: Client, oid: int) -> None:
        if client.reserved:
            size = client.reserved.pop(oid, 0)
            self.reserved_total -= size

    def _make_room(self, size: int) -> bool:
        over = self.store_used + self.reserved_total + size - self.capacity
        if over <= 0:
            return True
        victims = sorted(((obj.used, oid, obj) for oid, obj in self.objects.items()
                          if obj.state == READY and obj.shm_size and obj.spilled is None),
                         key=lambda v: v[0])
        for _, oid, obj in victims:
            if over <= 0:
                break
            if self.spill_limit and self.spilled_used + obj.shm_size > self.spill_limit:
                continue
            path = self.io.spill(oid, obj.shm_size)
            if path is None:
                return False
            obj.spilled = path
            self.store_used -= obj.shm_size
            self.spilled_used += obj.shm_size
            self.spill_count += 1
            over -= obj.shm_size
        return over <= 0

    def _restore(self, oid: int, obj: Obj) -> None:
        path = obj.spilled
        assert path is not None
        self._make_room(obj.shm_size)  # best effort: a read must not fail for lack of room
        if not self.io.restore(oid, path):
            err = ObjectLostError(f"Object {oid:x} could not be read back from disk ({path}).")
            obj.spilled = None
            self.spilled_used -= obj.shm_size
            obj.shm_size = 0
            obj.blob = system_error_blob(err)
            obj.error = True
            return
        obj.spilled = None
        self.spilled_used -= obj.shm_size
        self.store_used += obj.shm_size
        self.restore_count += 1

    def get_request(self, client: Client, oids: Iterable[int]) -> None:
        for oid in oids:
            obj = self.objects.get(oid)
            if obj is None and oid >> P.OWNER_SHIFT not in (0, self.node_index) and (
                    client.kind != P.KIND_NODE):
                obj = self.objects[oid] = Obj()  # a copy is on its way from the owner
            if obj is None:
                err = ObjectLostError(f"Object {oid:x} is gone: it was freed or never existed.")
                self.io.send(client, (P.OBJ, (oid, system_error_blob(err), 0)))
            elif obj.state == READY:
                self.io.send(client, (P.OBJ, self.loc(oid)))
            else:
                if client not in obj.subscribers:
                    obj.subscribers.append(client)
                self._fetch_if_foreign(oid)

    # ---------------------------------------------------------------- tasks
    def register_fn(self, fid: int, data: bytes) -> None:
        self.fns[fid] = data

    def submit(self, client: Client, spec: tuple, forwarded: bool = False) -> None:
        task = Task(spec, client)
        task.no_forward = forwarded
        self.tasks[task.id] = task
        job = spec[P.S_JOB]
        for rid in task.return_ids:
            obj = self.objects.get(rid)
            if obj is None:
                obj = Obj()
                self.objects[rid] = obj
            obj.owner_job = job
            obj.count += 1
            client.holds.add(rid)
        for dep in spec[P.S_DEPS]:
            self.incref(dep)
        for inner in spec[P.S_CONTAINED]:
            self.incref(inner)
        actor_id = spec[P.S_ACTOR]
        if actor_id and spec[P.S_METHOD] == P.ACTOR_INIT:
            actor = Actor(spec, job)
            if forwarded and client.kind == P.KIND_NODE:
                actor.host_for = client.node_index
            self.actors[actor_id] = actor
            # The creating process holds the actor through its handle.
            actor.count += 1
            client.holds.add(actor_id)
        elif actor_id:
            target = self.actors.get(actor_id)
            owner = actor_id >> P.OWNER_SHIFT
            if target is None and owner not in (0, self.node_index) and not forwarded:
                target = self.actors[actor_id] = Actor.stand_in(actor_id, owner)
            if target is None or target.state == "dead":
                self._finish_error(task, system_error_blob(self._dead_error(target, actor_id)))
                return
            target.queue.append(task)
        if client.kind == P.KIND_WORKER:
            self._event(job, "task_submitted", {
                "task_id": task.id, "name": spec[P.S_NAME], "deps": spec[P.S_DEPS],
                "nret": spec[P.S_NRET], "parent": spec[P.S_PARENT], "actor": actor_id})
        missing = 0
        for dep in spec[P.S_DEPS]:
            obj = self.objects[dep]
            if obj.state != READY:
                obj.waiting.append(task)
                missing += 1
                self._fetch_if_foreign(dep)
        task.missing = missing
        if missing == 0:
            self._deps_ready(task)

    def _deps_ready(self, task: Task) -> None:
        if task.finished:
            return
        for dep in task.spec[P.S_DEPS]:
            obj = self.objects[dep]
            if obj.error:
                assert obj.blob is not None
                self._finish_error(task, obj.blob)
                return
        shape = task.shape if not task.spec[P.S_ACTOR] else (task.spec[P.S_RESOURCES] or ())
        method = task.spec[P.S_METHOD]
        if method in (None, P.ACTOR_INIT) and not self._feasible(shape) and not task.no_forward:
            index = self._remote_for(shape, need_free=False)
            if index:
                self.parked.pop(task.id, None)
                if method is None:
                    self._forward(task, index)
                else:
                    self._host_actor(self.actors[task.spec[P.S_ACTOR]], task, index)
                return
        if method in (None, P.ACTOR_INIT) and not self._feasible(shape):
            if self.infeasible_wait > 0 and not task.no_forward:
                # Nodes can join this cluster: wait a little for one that has it.
                self.parked.setdefault(task.id, time.monotonic() + self.infeasible_wait)
                return
            self._infeasible(task, shape)
            return
        self.parked.pop(task.id, None)
        task.ready = True
        actor_id = task.spec[P.S_ACTOR]
        if actor_id:
            actor = self.actors[actor_id]
            if task.spec[P.S_METHOD] == P.ACTOR_INIT:
                self.pending_actors.append(actor)
                self.need_dispatch = True
            else:
                self._pump(actor)
            return
        queue = self.ready.get(task.shape)
        if queue is None:
            queue = self.ready[task.shape] = collections.deque()
        queue.append(task)
        self.need_dispatch = True

    def _infeasible(self, task: Task, shape: tuple[tuple[str, float], ...]) -> None:
        need = ", ".join(f"{n}: {a:g}" for n, a in shape)
        have = ", ".join(f"{n}: {a:g}" for n, a in sorted(self.total.items())
                         if not n.startswith("node:"))
        where = "the cluster has only" if not self.remote else "no node has it; this one has"
        self._finish_error(task, system_error_blob(ValueError(
            f"{task.spec[P.S_NAME]!r} needs {{{need}}} but {where} {{{have}}}. Ask for fewer "
            "resources, or start the cluster with more (init(num_cpus=..., num_gpus=..., "
            "resources={...}), or a node with them: nbdist start --address ...).")))
        actor = self.actors.get(task.spec[P.S_ACTOR]) if task.spec[P.S_ACTOR] else None
        if actor is not None and task.spec[P.S_METHOD] == P.ACTOR_INIT:
            self._actor_gone(actor, "no node can place it", no_restart=True)

    def expire_parked(self, now: float) -> None:
        """Fail the tasks no node could take within the wait."""
        for task_id, deadline in list(self.parked.items()):
            task = self.tasks.get(task_id)
            if task is None or task.finished:
                del self.parked[task_id]
            elif deadline <= now:
                del self.parked[task_id]
                shape = task.shape if not task.spec[P.S_ACTOR] else (
                    task.spec[P.S_RESOURCES] or ())
                self._infeasible(task, shape)

    def _fits(self, shape: tuple[tuple[str, float], ...]) -> bool:
        avail = self.avail
        for name, amount in shape:
            if avail.get(name, 0.0) < amount - 1e-9:
                return False
        return True

    def _feasible(self, shape: tuple[tuple[str, float], ...]) -> bool:
        return all(self.total.get(n, 0.0) >= a - 1e-9 for n, a in shape)

    def _acquire(self, shape: tuple[tuple[str, float], ...]) -> list[int]:
        avail = self.avail
        gpus: list[int] = []
        for name, amount in shape:
            avail[name] = avail.get(name, 0.0) - amount
            if name == "GPU":
                n = int(amount + 0.999)
                gpus, self.free_gpus = self.free_gpus[:n], self.free_gpus[n:]
        self.io.resources_changed()
        return gpus

    def _release(self, shape: tuple[tuple[str, float], ...], gpus: list[int]) -> None:
        avail = self.avail
        for name, amount in shape:
            avail[name] = avail.get(name, 0.0) + amount
        if gpus:
            self.free_gpus.extend(gpus)
        self.io.resources_changed()

    def dispatch(self) -> None:
        """Start queued work where resources and workers allow (called once per loop turn)."""
        self.need_dispatch = False
        while self.pending_actors:
            actor = self.pending_actors[0]
            shape = actor.spec[P.S_RESOURCES] or ()
            if not self._fits(shape):
                index = self._remote_for(shape, need_free=True) if self.remote and shape else 0
                if not index:
                    break
                self.pending_actors.popleft()
                init = self._init_task(actor)
                self._host_actor(actor, init, index)
                continue
            worker = self.io.spawn_worker()
            if worker is None:
                break
            self.pending_actors.popleft()
            actor.held = shape
            actor.gpus = self._acquire(shape)
            self._start_actor(actor, worker)
        for shape, queue in self.ready.items():
            while queue:
                task = queue[0]
                if task.finished:
                    queue.popleft()
                    continue
                if not self._fits(shape):
                    if self.remote:
                        self._spill(queue, shape)
                    break
                worker = self._idle_worker()
                if worker is None:
                    if self.remote:
                        self._spill(queue, shape)
                    break
                queue.popleft()
                self._assign(task, worker)
        self._reap_idle()

    def _idle_worker(self) -> Worker | None:
        while self.idle:
            w = self.idle.pop()
            if w.state == "idle":
                return w
        active = sum(1 for w in self.workers.values()
                     if w.state in ("idle", "busy") and not w.blocked)
        if active + self.spawning >= self.num_cpus + 1 and len(self.workers) >= self.num_cpus:
            # Enough task workers for the CPUs (tasks with num_cpus=0 share them).
            if active >= self.max_workers:
                return None
        if len(self.workers) >= self.max_workers:
            return None
        return self.io.spawn_worker()

    def _assign(self, task: Task, worker: Worker) -> None:
        task.gpus = self._acquire(task.shape)
        task.held = task.shape
        task.worker = worker
        task.attempt += 1
        task.dispatched_at = time.time()
        worker.state = "busy"
        worker.task = task
        self._exec(worker, task)

    def _exec(self, worker: Worker, task: Task) -> None:
        client = worker.client
        assert client is not None
        spec = task.spec
        fid = spec[P.S_FID]
        if fid and fid not in worker.fns:
            data = self.fns.get(fid)
            if data is not None:
                self.io.send(client, (P.FN, fid, data))
                worker.fns.add(fid)
        deps = [self.loc(d) for d in spec[P.S_DEPS]]
        self.io.send(client, (P.EXEC, spec, deps, task.gpus))
        self.started.setdefault(task.owner, {})[task.id] = worker.pid

    def result(self, worker: Worker, task_id: int, ok: bool, locs: list, error: bytes | None,
               t0: float, t1: float, contained: tuple[int, ...] = ()) -> None:
        if worker.client is not None and worker.client.reserved:
            for loc in locs:
                self._unreserve(worker.client, loc[0])
        task = self.tasks.get(task_id)
        if task is None:
            return
        actor = worker.actor
        if actor is not None:
            actor.inflight.pop(task_id, None)
        elif worker.task is task:
            worker.task = None
            self._worker_free(worker, task)
        if task.finished:
            return
        if task.spec[P.S_METHOD] == P.ACTOR_INIT and actor is not None:
            if ok:
                actor.state = "alive"
                self._pump(actor)
            else:
                actor.init_error = error
                self._actor_gone(actor, "its constructor raised", no_restart=True)
        if task.cancelled and not ok:
            error = system_error_blob(TaskCancelledError(
                f"Task {task.spec[P.S_NAME]!r} was cancelled."))
        if not ok and error is not None and self._retry_on_error(task, error):
            return
        if ok:
            self._finish(task, locs, t0, t1, worker.pid)
        else:
            assert error is not None
            self._finish_error(task, error, t0, t1, worker.pid)

    def _retry_on_error(self, task: Task, error: bytes) -> bool:
        policy = task.spec[P.S_RETRY_EXC]
        if not policy or task.retries_left <= 0 or task.cancelled or error[:1] != b"E":
            return False
        if policy is not True:
            # The owner sent the allowed exception types by name; match them in the MRO.
            names = error_type_names(error)
            if not any(n in names for n in policy):
                return False
        task.retries_left -= 1
        self._event(task.spec[P.S_JOB], "task_retried", {
            "task_id": task.id, "name": task.spec[P.S_NAME], "attempt": task.attempt + 1,
            "reason": "the task raised and retry_exceptions allows a retry"})
        self._requeue(task)
        return True

    def _requeue(self, task: Task) -> None:
        task.worker = None
        if task.spec[P.S_ACTOR]:
            actor = self.actors[task.spec[P.S_ACTOR]]
            actor.queue.appendleft(task)
            self._pump(actor)
            return
        if not task.no_forward and not self._feasible(task.shape):
            # It ran on another node (now lost) because only that node had its resources:
            # place it again as a new task would be (another node, a wait, or a clear error).
            task.ready = False
            self._deps_ready(task)
            return
        self.ready.setdefault(task.shape, collections.deque()).appendleft(task)
        self.need_dispatch = True

    def _lost_run(self, task: Task, cancelled_note: str, reason: str, crash_text: str) -> None:
        """The process running ``task`` is gone: it runs again while retries last, else
        fails with WorkerCrashedError(``crash_text``); a cancelled one just ends."""
        name = task.spec[P.S_NAME]
        if task.cancelled:
            self._finish_error(task, system_error_blob(TaskCancelledError(
                f"Task {name!r} was cancelled{cancelled_note}.")))
        elif task.retries_left > 0:
            task.retries_left -= 1
            self._event(task.spec[P.S_JOB], "task_retried", {
                "task_id": task.id, "name": name, "attempt": task.attempt + 1,
                "reason": reason})
            self._requeue(task)
        else:
            self._finish_error(task, system_error_blob(WorkerCrashedError(crash_text)))

    def _worker_free(self, worker: Worker, task: Task) -> None:
        shape = task.held
        if worker.blocked:
            shape = tuple((n, a) for n, a in shape if n != "CPU")
            worker.blocked = False
        self._release(shape, task.gpus)
        task.held = ()
        task.gpus = []
        if worker.state == "busy":
            worker.state = "idle"
            worker.idle_since = time.monotonic()
            self.idle.append(worker)
        self.need_dispatch = True

    def _finish(self, task: Task, locs: list, t0: float, t1: float, pid: int) -> None:
        task.finished = True
        pending = self.started.get(task.owner)
        if pending:
            pending.pop(task.id, None)
        self.tasks.pop(task.id, None)
        owner = task.owner
        self.io.send(owner, (P.DONE, task.id, True, locs, t0, t1, pid))
        for loc in locs:
            oid = loc[0]
            obj = self.objects.get(oid)
            if obj is None:
                # Nobody holds it any more; the value is not needed.
                if loc[2]:
                    self.io.unlink(oid)
                continue
            obj.subscribers = [s for s in obj.subscribers if s is not owner]
            self._store(oid, obj, loc[:3], loc[3] if len(loc) > 3 else ())
        if owner.kind == P.KIND_WORKER:
            self._event(task.spec[P.S_JOB], "task_finished", {
                "task_id": task.id, "name": task.spec[P.S_NAME], "t0": t0, "t1": t1,
                "pid": pid, "sizes": [(loc[0], len(loc[1]) if loc[1] else loc[2]) for loc in locs]})
        self._unpin(task)
        if owner.kind == P.KIND_NODE:
            self._release_forwarded(owner, task)

    def _finish_error(self, task: Task, error: bytes, t0: float = 0.0, t1: float = 0.0,
                      pid: int = 0) -> None:
        if task.finished:
            return
        task.finished = True
        self.tasks.pop(task.id, None)
        owner = task.owner
        pending = self.started.get(owner)
        if pending:
            pending.pop(task.id, None)
        locs = [(rid, error, 0) for rid in task.return_ids]
        if task.spec[P.S_NRET] == 0:
            locs = []
        self.io.send(owner, (P.DONE, task.id, False, locs, t0, t1, pid))
        for loc in locs:
            obj = self.objects.get(loc[0])
            if obj is not None:
                obj.subscribers = [s for s in obj.subscribers if s is not owner]
                self._store(loc[0], obj, loc, ())
        if owner.kind == P.KIND_WORKER:
            self._event(task.spec[P.S_JOB], "task_failed", {
                "task_id": task.id, "name": task.spec[P.S_NAME], "t0": t0, "t1": t1,
                "pid": pid, "error": error})
        self._unpin(task)
        if owner.kind == P.KIND_NODE:
            self._release_forwarded(owner, task)

    def _release_forwarded(self, peer: Client, task: Task) -> None:
        """A task another node forwarded here ended and its results went back: drop the
        copies of its arguments and results held for that node."""
        self.refs(peer, [(-1, oid) for oid in (*task.return_ids, *task.spec[P.S_DEPS])])

    def _unpin(self, task: Task) -> None:
        spec = task.spec
        for dep in spec[P.S_DEPS]:
            self.decref(dep)
        for inner in spec[P.S_CONTAINED]:
            self.decref(inner)

    # ---------------------------------------------------------------- blocking in get
    def blocked(self, worker: Worker) -> None:
        task = worker.task
        if task is None or worker.blocked:
            return
        cpu = sum(a for n, a in task.held if n == "CPU")
        worker.blocked = True
        if cpu:
            self.avail["CPU"] = self.avail.get("CPU", 0.0) + cpu
            self.io.resources_changed()
        self.need_dispatch = True

    def unblocked(self, worker: Worker) -> None:
        task = worker.task
        if task is None or not worker.blocked:
            return
        worker.blocked = False
        cpu = sum(a for n, a in task.held if n == "CPU")
        if cpu:
            # May oversubscribe for a moment: the task was already running.
            self.avail["CPU"] = self.avail.get("CPU", 0.0) - cpu
            self.io.resources_changed()

    # ---------------------------------------------------------------- cancel
    def _producer(self, oid: int) -> Task | None:
        """The unfinished task returning ``oid`` (return ids follow their task's id)."""
        for k in range(1, 257):
            task = self.tasks.get(oid - k)
            if task is not None:
                return task if oid in task.return_ids else None
        return None

    def cancel(self, oid: int, force: bool) -> None:
        task = self._producer(oid)
        if task is None or task.finished:
            return
        task_id = task.id
        task.cancelled = True
        err = system_error_blob(TaskCancelledError(
            f"Task {task.spec[P.S_NAME]!r} was cancelled."))
        actor_id = task.spec[P.S_ACTOR]
        if actor_id and task.remote:
            self.io.to_node(task.remote, (P.CANCEL, oid, force))
            return
        if actor_id:
            actor = self.actors.get(actor_id)
            if actor is not None and task in actor.queue:
                actor.queue.remove(task)
                self._finish_error(task, err)
            elif actor is not None and actor.worker is not None and actor.worker.client:
                self.io.send(actor.worker.client, (P.INTERRUPT, task_id))
            return
        if task.remote:
            self.io.to_node(task.remote, (P.CANCEL, oid, force))
            return
        worker = task.worker
        if worker is None:
            # Waiting for dependencies or queued: the queues skip finished tasks.
            self._finish_error(task, err)
            return
        if force:
            self.io.kill_worker(worker)
        else:
            # The worker's main thread runs the task and is not reading messages: signal it.
            self.io.interrupt_worker(worker)

    # ---------------------------------------------------------------- workers
    def worker_started(self, worker: Worker) -> None:
        self.workers[worker.pid] = worker
        self.idle.append(worker)
        self.need_dispatch = True

    def worker_lost(self, worker: Worker, exit_code: int | None) -> None:
        if worker.state == "dead":
            return
        worker.state = "dead"
        self.workers.pop(worker.pid, None)
        how = _exit_text(exit_code)
        task = worker.task
        worker.task = None
        if task is not None and not task.finished:
            self._worker_free(worker, task)
            worker.state = "dead"
            name = task.spec[P.S_NAME]
            self._lost_run(
                task, " (its worker was stopped)", f"worker pid={worker.pid} {how}",
                f"The worker (pid={worker.pid}) running task {name!r} {how}; no retries left "
                f"(max_retries={task.spec[P.S_MAX_RETRIES]}). If the process ran out of "
                "memory, lower the memory the task uses or give it more resources.")
        if worker.actor is not None:
            self._actor_worker_lost(worker.actor, worker, how)
        for job in self.jobs:
            self._event(job, "worker_down", {"pid": worker.pid, "reason": how})
        self.need_dispatch = True

    def _reap_idle(self) -> None:
        if len(self.workers) <= self.num_cpus:
            return
        now = time.monotonic()
        extra = len(self.workers) - self.num_cpus
        for w in list(self.workers.values()):
            if extra <= 0:
                break
            if w.state == "idle" and now - w.idle_since > 10.0:
                w.state = "dead"
                self.workers.pop(w.pid, None)
                self.io.kill_worker(w, graceful=True)
                extra -= 1

    # ---------------------------------------------------------------- actors
    def _start_actor(self, actor: Actor, worker: Worker) -> None:
        worker.state = "actor"
        worker.actor = actor
        actor.worker = worker
        actor.state = "pending"
        init = self._init_task(actor)
        actor.inflight[init.id] = init
        init.worker = worker
        self._exec(worker, init)
        self._pump(actor)

    def _init_task(self, actor: Actor) -> Task:
        """The actor's constructor call; on a restart a fresh bookkeeping record of it."""
        init = self.tasks.get(actor.spec[P.S_TASK_ID])
        if init is None:
            init = Task(actor.spec, self.jobs.get(actor.job) or _NullClient)
            init.retries_left = 0
            self.tasks[init.id] = init
            for dep in actor.spec[P.S_DEPS]:
                self.incref(dep)
            for inner in actor.spec[P.S_CONTAINED]:
                self.incref(inner)
        return init

    def _host_actor(self, actor: Actor, init: Task, index: int) -> None:
        """Run the actor on node ``index``: its constructor and then its calls go there, in
        order; this node keeps its record (handles, restarts, name). That node restarts the
        process itself while restarts remain and reports each restart and the end."""
        actor.remote = index
        actor.state = "pending"
        init.ready = True
        extra = dict(actor.spec[P.S_EXTRA] or {})
        extra["max_restarts"] = actor.restarts_left
        extra["name"] = None  # the name stays registered by this node
        spec = actor.spec
        init.spec = (*spec[:P.S_EXTRA], extra, *spec[P.S_EXTRA + 1:])
        if index in self.remote:
            avail = self.remote[index]["available"]
            for name, amount in actor.spec[P.S_RESOURCES] or ():
                avail[name] = avail.get(name, 0.0) - amount
        self._forward(init, index)
        self._pump(actor)

    def hosted_actor_event(self, index: int, actor_id: int, what: str, reason: str) -> None:
        """Node ``index``, which runs one of our actors, restarted its process or lost it."""
        actor = self.actors.get(actor_id)
        if actor is None or actor.remote != index or not actor.spec:
            return
        if what == "restarted":
            actor.restarts_left = max(0, actor.restarts_left - 1)
            actor.restarts += 1
            self._event(actor.job, "actor_restarted", {"actor_id": actor.id,
                                                       "restarts": actor.restarts})
        elif what == "dead":
            actor.remote = 0  # nothing left to stop there
            self._actor_gone(actor, reason, no_restart=True)

    def _pump(self, actor: Actor) -> None:
        if actor.remote:
            queue = actor.queue
            while queue and queue[0].ready:
                task = queue.popleft()
                if not task.finished:
                    self._forward(task, actor.remote)
            if not queue and actor.state == "remote":
                self.actors.pop(actor.id, None)  # made again by the next call
            elif actor.count <= 0 and not actor.detached and actor.spec:
                self._maybe_retire(actor)
            return
        if actor.state == "dead":
            err = self._dead_error(actor, actor.id)
            while actor.queue:
                self._finish_error(actor.queue.popleft(), system_error_blob(err))
            return
        worker = actor.worker
        if worker is None or worker.client is None or actor.state not in ("alive", "pending"):
            return
        queue = actor.queue
        while queue and queue[0].ready:
            task = queue.popleft()
            if task.finished:
                continue
            task.worker = worker
            task.attempt += 1
            actor.inflight[task.id] = task
            self._exec(worker, task)
        if actor.count <= 0 and not actor.detached:
            self._maybe_retire(actor)

    def _maybe_retire(self, actor: Actor) -> None:
        if actor.state == "dead" or actor.queue or len(actor.inflight) > 0:
            return
        self._actor_gone(actor, "all handles to it went out of scope", no_restart=True,
                         graceful=True)

    def kill_actor(self, actor_id: int, no_restart: bool) -> None:
        actor = self.actors.get(actor_id)
        owner = actor_id >> P.OWNER_SHIFT
        if (actor is None or actor.remote) and owner not in (0, self.node_index):
            self.io.to_node(owner, (P.KILL_ACTOR, actor_id, no_restart))
            return
        if actor is None or actor.state == "dead":
            return
        if no_restart:
            actor.killed = True
            actor.restarts_left = 0
        if actor.remote:  # runs on another node: that node stops (and maybe restarts) it
            self.io.to_node(actor.remote, (P.KILL_ACTOR, actor_id, no_restart))
            if no_restart:
                self._actor_gone(actor, "it was killed with kill()", no_restart=True)
            return
        if actor.worker is not None:
            self.io.kill_worker(actor.worker)
        else:
            self._actor_gone(actor, "it was killed with kill()", no_restart=True)

    def _actor_worker_lost(self, actor: Actor, worker: Worker, how: str) -> None:
        if actor.state == "dead":
            return
        actor.worker = None
        self._release(actor.held, actor.gpus)
        actor.held = ()
        actor.gpus = []
        if actor.killed:
            self._actor_gone(actor, "it was killed with kill()", no_restart=True)
            return
        if actor.restarts_left <= 0 or actor.init_error is not None:
            self._actor_gone(actor, f"its process (pid={worker.pid}) {how}", no_restart=True)
            return
        actor.restarts_left -= 1
        actor.restarts += 1
        actor.state = "restarting"
        lost = [t for tid, t in actor.inflight.items() if tid != actor.spec[P.S_TASK_ID]]
        actor.inflight.clear()
        init = self.tasks.pop(actor.spec[P.S_TASK_ID], None)
        if init is not None:
            self._unpin(init)
        self._calls_lost_in_restart(actor, lost, f"its process pid={worker.pid} {how}")
        if actor.host_for:
            self.io.to_node(actor.host_for, (P.ACTOR_EVENT, actor.id, "restarted", how))
        else:
            self._event(actor.job, "actor_restarted", {"actor_id": actor.id,
                                                       "restarts": actor.restarts})
        self.pending_actors.append(actor)
        self.need_dispatch = True

    def _calls_lost_in_restart(self, actor: Actor, lost: list[Task], how: str) -> None:
        """Calls that were running when ``actor`` died (``how``) and it is restarting: back to
        the front of its queue, in order, while ``max_task_retries`` allows; else they fail."""
        retries = (actor.spec[P.S_EXTRA] or {}).get("max_task_retries", 0)
        err = ActorDiedError(
            f"The actor {actor.id:x} died while running this call ({how}); it is restarting. "
            "Set max_task_retries to retry calls.", f"{actor.id:x}")
        for task in sorted(lost, key=lambda t: t.id, reverse=True):
            if retries == -1 or task.attempt <= retries:
                task.worker = None
                actor.queue.appendleft(task)
            else:
                self._finish_error(task, system_error_blob(err))

    def _actor_gone(self, actor: Actor, reason: str, no_restart: bool,
                    graceful: bool = False) -> None:
        if actor.state == "dead":
            return
        actor.state = "dead"
        actor.restarts_left = 0
        worker = actor.worker
        actor.worker = None
        if worker is not None:
            self._release(actor.held, actor.gpus)
            actor.held = ()
            actor.gpus = []
            self.io.kill_worker(worker, graceful=graceful)
        if actor.remote and actor.spec:
            # Ours, running on another node: let it go there (after its queued calls when
            # the handles are gone, at once otherwise).
            msg = ((P.NODE_REFS, [(-1, actor.id)]) if graceful
                   else (P.KILL_ACTOR, actor.id, True))
            self.io.to_node(actor.remote, msg)
        if actor.init_error is not None:
            reason = f"{reason}:\n{error_text(actor.init_error).rstrip()}"
        blob = system_error_blob(self._dead_error(actor, actor.id, reason))
        for task in list(actor.inflight.values()) + list(actor.queue):
            self._finish_error(task, blob)
        actor.inflight.clear()
        actor.queue.clear()
        if actor in self.pending_actors:
            self.pending_actors.remove(actor)
        init = self.tasks.pop(actor.spec[P.S_TASK_ID], None)
        if init is not None:
            init.finished = True
            self._unpin(init)
        if actor.name:
            self.io.to_head("unregister_name", (actor.namespace, actor.name, actor.id))
        if actor.host_for:
            self.io.to_node(actor.host_for, (P.ACTOR_EVENT, actor.id, "dead", reason))
        else:
            self._event(actor.job, "actor_died", {"actor_id": actor.id, "reason": reason})
        self._dead_reasons[actor.id] = reason
        if actor.count <= 0:
            self.actors.pop(actor.id, None)

    def _dead_error(self, actor: Actor | None, actor_id: int, reason: str | None = None
                    ) -> ActorDiedError:
        reason = reason or self._dead_reasons.get(actor_id) or "it is no longer alive"
        return ActorDiedError(
            f"The actor {actor_id:x} cannot run the call: {reason}.", f"{actor_id:x}")

    # ---------------------------------------------------------------- other nodes
    def set_cluster_view(self, view: dict[int, dict[str, Any]]) -> None:
        """The other nodes as the head reports them; a node that died is handled by
        `node_lost` (its connection closing), not here."""
        self.remote = {i: dict(info) for i, info in view.items()
                       if i != self.node_index and info.get("alive")}
        if self.remote:
            self.need_dispatch = True
        for task_id in list(self.parked):
            task = self.tasks.get(task_id)
            if task is None or task.finished:
                self.parked.pop(task_id, None)
            else:
                self._deps_ready(task)

    def _remote_for(self, shape: tuple[tuple[str, float], ...], need_free: bool) -> int:
        """A node that can run ``shape`` (has it free now, with ``need_free``); 0 if none.
        Among those with it free, the one with the most free CPU."""
        best, best_cpu = 0, float("-inf")
        for index, info in self.remote.items():
            have = info["available"] if need_free else info["total"]
            if all(have.get(n, 0.0) >= a - 1e-9 for n, a in shape):
                cpu = info["available"].get("CPU", 0.0)
                if cpu > best_cpu:
                    best, best_cpu = index, cpu
        return best

    def _spill(self, queue: collections.deque[Task], shape: tuple[tuple[str, float], ...]
               ) -> None:
        """Send queued tasks this node cannot start now to nodes that have room for them."""
        while queue:
            task = queue[0]
            if task.finished:
                queue.popleft()
                continue
            if task.no_forward:
                return
            index = self._remote_for(shape, need_free=True)
            if not index:
                return
            queue.popleft()
            self._forward(task, index)

    def _forward(self, task: Task, index: int) -> None:
        task.remote = index
        task.attempt += 1
        task.dispatched_at = time.time()
        # Count it against that node until its next report.
        if index in self.remote and not task.spec[P.S_ACTOR]:
            avail = self.remote[index]["available"]
            for name, amount in task.shape:
                avail[name] = avail.get(name, 0.0) - amount
        self.io.forward(index, task.spec, [self.loc(d) for d in task.spec[P.S_DEPS]])

    def remote_started(self, task_ids: list[int], t: float) -> None:
        by_owner: dict[Client, list[tuple[int, int]]] = {}
        for tid in task_ids:
            task = self.tasks.get(tid)
            if task is not None and not task.finished:
                by_owner.setdefault(task.owner, []).append((tid, 0))
        for owner, items in by_owner.items():
            self.io.send(owner, (P.STARTED, items, t))

    def remote_result(self, index: int, task_id: int, ok: bool, locs: list, t0: float,
                      t1: float, pid: int) -> None:
        """A task forwarded to node ``index`` ended there; ``locs`` are local copies."""
        task = self.tasks.get(task_id)
        if task is None or task.finished or task.remote != index:
            for loc in locs:
                if loc[2]:
                    self.io.unlink(loc[0])
            return
        task.remote = 0
        for loc in locs:
            for inner in loc[3] if len(loc) > 3 else ():
                if inner >> P.OWNER_SHIFT == index:
                    self.borrowed[inner] = index  # that node holds it until we let go
        if task.spec[P.S_METHOD] == P.ACTOR_INIT:
            actor = self.actors.get(task.spec[P.S_ACTOR])
            if actor is not None and actor.remote == index and actor.state != "dead":
                if ok:
                    actor.state = "alive"
                    self._pump(actor)
                else:
                    actor.init_error = locs[0][1] if locs else None
                    actor.remote = 0  # its node dropped it already
                    self._actor_gone(actor, "its constructor raised", no_restart=True)
        if ok:
            self._finish(task, locs, t0, t1, pid)
            return
        error = locs[0][1] if locs else system_error_blob(RuntimeError("the task failed"))
        if self._retry_on_error(task, error):
            return
        self._finish_error(task, error, t0, t1, pid)

    def node_lost(self, index: int) -> None:
        """Node ``index`` is gone: its forwarded tasks run again (while retries last), and
        what we were fetching from it is lost."""
        self.remote.pop(index, None)
        self.lost_nodes.add(index)
        restarting: dict[int, Actor] = {}
        lost_calls: dict[int, list[Task]] = {}
        for actor in [a for a in self.actors.values() if a.remote == index and a.spec]:
            # Ours, placed there: restart it elsewhere while restarts remain.
            actor.remote = 0
            if actor.killed or actor.restarts_left <= 0 or actor.state == "dead":
                self._actor_gone(actor, f"its node ({index}) was lost", no_restart=True)
                continue
            actor.restarts_left -= 1
            actor.restarts += 1
            actor.state = "restarting"
            restarting[actor.id] = actor
        for actor in [a for a in self.actors.values() if a.remote == index]:
            actor.state = "dead"
            self._dead_reasons[actor.id] = f"its node ({index}) was lost"
            del self.actors[actor.id]
            dead_blob = system_error_blob(self._dead_error(actor, actor.id))
            for task in list(actor.queue):
                self._finish_error(task, dead_blob)
            actor.queue.clear()
        for task in [t for t in self.tasks.values() if t.remote == index and not t.finished]:
            task.remote = 0
            name = task.spec[P.S_NAME]
            if task.spec[P.S_ACTOR] in restarting:
                if task.spec[P.S_METHOD] != P.ACTOR_INIT:
                    lost_calls.setdefault(task.spec[P.S_ACTOR], []).append(task)
                continue
            if task.spec[P.S_ACTOR]:
                actor_id = task.spec[P.S_ACTOR]
                self._finish_error(task, system_error_blob(ActorDiedError(
                    f"The actor {actor_id:x} cannot run the call {name!r}: its node ({index}) "
                    "was lost.", f"{actor_id:x}")))
                continue
            self._lost_run(
                task, "", f"node {index} running it was lost",
                f"The node running task {name!r} was lost; no retries left "
                f"(max_retries={task.spec[P.S_MAX_RETRIES]}).")
        for oid in [o for o in self.fetching if o >> P.OWNER_SHIFT == index]:
            self.fetching.discard(oid)
            obj = self.objects.get(oid)
            if obj is not None and obj.state == PENDING:
                err = ObjectLostError(f"Object {oid:x} was lost with the node that owned it.")
                self._store(oid, obj, (oid, system_error_blob(err), 0), ())
        for oid in [o for o, owner in self.borrowed.items() if owner == index]:
            del self.borrowed[oid]
        for actor in restarting.values():
            self._restart_elsewhere(actor, lost_calls.get(actor.id, []), index)

    def _restart_elsewhere(self, actor: Actor, lost: list[Task], index: int) -> None:
        """Our actor's node ``index`` was lost: the calls it was running run again after the
        restart while ``max_task_retries`` allows, and the actor is placed anew."""
        self._calls_lost_in_restart(actor, lost, f"its node ({index}) was lost")
        self._event(actor.job, "actor_restarted", {"actor_id": actor.id,
                                                   "restarts": actor.restarts})
        init = self._init_task(actor)
        init.remote = 0
        self._deps_ready(init)

    def _fetch_if_foreign(self, oid: int) -> None:
        owner = oid >> P.OWNER_SHIFT
        if owner in (0, self.node_index) or oid in self.fetching:
            return
        if owner in self.lost_nodes:
            obj = self.objects.get(oid)
            if obj is not None and obj.state == PENDING and self._producer(oid) is None:
                err = ObjectLostError(f"Object {oid:x} was lost with the node that owned it "
                                       f"(node {owner}).")
                self._store(oid, obj, (oid, system_error_blob(err), 0), ())
            return
        if self._producer(oid) is not None:
            return  # made here by a task forwarded to us
        self.fetching.add(oid)
        self.io.to_node(owner, (P.FETCH, [oid]))

    def value_arrived(self, loc: tuple) -> None:
        """A copy of an object fetched from its owner node."""
        oid = loc[0]
        self.fetching.discard(oid)
        obj = self.objects.get(oid)
        if obj is None or obj.state == READY:
            if loc[2]:
                self.io.unlink(oid)
            return
        self._store(oid, obj, loc[:3], loc[3] if len(loc) > 3 else ())

    def accept_forward(self, peer: Client, spec: tuple, dep_locs: list) -> None:
        """Node ``peer`` asks us to run a task; ``dep_locs`` are local copies of its
        arguments, held for it until the task ends."""
        for loc in dep_locs:
            obj = self.objects.get(loc[0])
            if obj is not None and obj.state == READY:
                if loc[2]:
                    self.io.unlink(loc[0])  # we had it already
                if loc[0] not in peer.holds:
                    peer.holds.add(loc[0])
                    obj.count += 1
                continue
            self.put(peer, loc[0], loc[1], loc[2], ())
        self.submit(peer, spec, forwarded=True)

    # ---------------------------------------------------------------- misc
    def _event(self, job: int, kind: str, fields: dict) -> None:
        client = self.jobs.get(job)
        if client is not None:
            self.io.send(client, (P.EVENT, kind, fields))
        elif job >> 20 not in (0, self.node_index):
            self.io.to_node(job >> 20, (P.RELAY, job, (P.EVENT, kind, fields)))

    def has_notices(self) -> bool:
        return bool(self.started or self.freed)

    def flush_notices(self) -> None:
        """Send the batched STARTED and freed notices."""
        if self.started:
            now = time.time()
            for owner, items in self.started.items():
                if items:
                    self.io.send(owner, (P.STARTED, list(items.items()), now))
            self.started = {}
        if self.freed:
            for job, ids in self.freed.items():
                self._event(job, "objects_freed", {"ids": ids})
            self.freed = {}

    def task_name(self, task_id: int) -> tuple[str, int]:
        task = self.tasks.get(task_id)
        if task is None:
            return "?", 0
        return task.spec[P.S_NAME], task.spec[P.S_JOB]

    def snapshot(self) -> dict:
        return {
            "total": dict(self.total),
            "available": {k: max(0.0, v) for k, v in self.avail.items()},
            "workers": len(self.workers),
            "tasks": len(self.tasks),
            "objects": len(self.objects),
            "store_used": self.store_used,
            "store_capacity": self.capacity,
            "spilled": self.spilled_used,
            "spills": self.spill_count,
            "restores": self.restore_count,
            "actors": sum(1 for a in self.actors.values()
                          if a.state != "dead" and not a.remote),
        }


class _NullClientType(Client):
    pass


_NullClient = _NullClientType(None, "none", 0, 0, 0)


def _exit_text(code: int | None) -> str:
    if code is None:
        return "exited unexpectedly"
    if code < 0:
        import signal

        try:
            sig = signal.Signals(-code).name
        except ValueError:
            sig = str(-code)
        extra = " (killed: likely out of memory or stopped by a signal)" if sig == "SIGKILL" else ""
        return f"was killed by {sig}{extra}"
    return f"exited with code {code}"

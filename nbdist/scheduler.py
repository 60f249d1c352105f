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

Where: the records it keeps and the NodeIO interface are in `sched_records`. Four sections of
NodeState live in modules of their own, as functions of the state bound as methods in the class
body: `sched_memory` (room for writers, spilling), `sched_workers` (worker processes started
and lost), `sched_actors` (actors; also a driver's direct calls, when one is resubmitted here or
ends with results to hold) and `sched_remote` (other nodes). Clients, refcounts, objects, tasks,
blocking, cancel and notices stay here.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterable
from typing import Any

from . import protocol as P
from . import sched_actors, sched_memory, sched_remote, sched_workers
from .exceptions import ObjectLostError, TaskCancelledError, WorkerCrashedError
from .sched_records import PENDING, READY, Actor, Client, NodeIO, Obj, Task, Worker
from .serialization import error_type_names, system_error_blob


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
            if rid not in client.holds:  # (a resubmitted direct call's may be held already)
                client.holds.add(rid)
                obj.count += 1
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
            if spec[P.S_EXTRA] and not self._lost_call_may_run(target, task):
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
            worker = self.io.spawn_worker(actor=True)
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

    # Sections in modules of their own (functions of the state, bound here).
    reserve = sched_memory.reserve
    _unreserve = sched_memory._unreserve
    _make_room = sched_memory._make_room
    _restore = sched_memory._restore
    _start_actor = sched_actors._start_actor
    _init_task = sched_actors._init_task
    _host_actor = sched_actors._host_actor
    hosted_actor_event = sched_actors.hosted_actor_event
    _pump = sched_actors._pump
    _maybe_retire = sched_actors._maybe_retire
    kill_actor = sched_actors.kill_actor
    _actor_worker_lost = sched_actors._actor_worker_lost
    _calls_lost_in_restart = sched_actors._calls_lost_in_restart
    _actor_gone = sched_actors._actor_gone
    _dead_error = sched_actors._dead_error
    _lost_call_may_run = sched_actors._lost_call_may_run
    direct_result = sched_actors.direct_result
    set_cluster_view = sched_remote.set_cluster_view
    _remote_for = sched_remote._remote_for
    _spill = sched_remote._spill
    _forward = sched_remote._forward
    remote_started = sched_remote.remote_started
    remote_result = sched_remote.remote_result
    node_lost = sched_remote.node_lost
    _restart_elsewhere = sched_remote._restart_elsewhere
    _fetch_if_foreign = sched_remote._fetch_if_foreign
    value_arrived = sched_remote.value_arrived
    accept_forward = sched_remote.accept_forward
    worker_started = sched_workers.worker_started
    worker_lost = sched_workers.worker_lost
    _reap_idle = sched_workers._reap_idle

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

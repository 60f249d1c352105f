"""The node state: wires the scheduler's collaborators and handles the daemon's messages
(layer L1). See the package docstring for the design.

``NodeState`` owns no table of its own: it builds `Notices`, `ObjectTable`, `TaskTable`,
`Placement`, `WorkerPool` and `ActorTable`, hands each the others' operations it needs, and
turns each message the daemon receives into calls on them. What belongs to no single
collaborator lives here: a task's path from submission to its end (arguments ready -> placed
here, forwarded, parked or failed -> queued -> given a worker -> result), dispatch, a worker
or a node lost, cancel. For speed the per-task path reads the object and task dicts directly
(``_objs``, ``_tasks``: the same dicts their tables own).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from nbdist import events as ev
from nbdist.exceptions import (
    ActorDiedError,
    ObjectLostError,
    OutOfMemoryError,
    TaskCancelledError,
    TaskPlacementGroupRemoved,
    WorkerCrashedError,
)
from nbdist.ids import CLIENT_SHIFT, NODE_SHIFT
from nbdist.scheduler.actors import ActorTable
from nbdist.scheduler.bundles import Bundles, group_of
from nbdist.scheduler.lineage import Lineage
from nbdist.scheduler.notices import Notices
from nbdist.scheduler.objects import ObjectTable
from nbdist.scheduler.placement import Placement, without_soft_pins
from nbdist.scheduler.records import READY, Client, NodeIO, Obj, Shape, Task, Worker
from nbdist.scheduler.stepping import Stepper
from nbdist.scheduler.tasks import TaskTable
from nbdist.scheduler.workers import WorkerPool, exit_text
from nbdist.wire import protocol as P
from nbdist.wire.serialization import error_blob, system_error_blob


class NodeState:
    def __init__(self, io: NodeIO, resources: dict[str, float], gpu_ids: list[int],
                 num_cpus: int, max_extra_workers: int, capacity: int) -> None:
        self.io = io
        self.node_index: int = getattr(io, "node_index", 1)
        self.notices = Notices(io, self.node_index)
        self.objects = ObjectTable(io, self.node_index, capacity, self.notices,
                                   deps_ready=self._deps_ready, producer=self._producer,
                                   actor_ref=self._actor_ref)
        self.tasks = TaskTable(io, self.objects, self.notices)
        self.placement = Placement(io, self.node_index, resources, gpu_ids, self.objects.loc)
        self.bundles = Bundles(self.placement)
        self.workers = WorkerPool(io, num_cpus, max_extra_workers)
        self.actors = ActorTable(io, self.node_index, self.tasks, self.placement, self.notices,
                                 place=self._deps_ready)
        self.stepper = Stepper(self.notices, self._go)
        self._objs = self.objects.by_id
        self._tasks = self.tasks.by_id
        self.lineage = Lineage(self.node_index, self._objs, self.objects.incref,
                               self.objects.decref)
        self.tasks.rebuilt = self._rebuilt
        self.objects.watched = self.lineage.by_item  # (the same dict)
        self.objects.gone = self.lineage.forget
        # Tasks that submitted tasks here, and tasks being cancelled with the tasks they
        # submit: ids of ended tasks leave them when they have doubled (`_pruned`).
        self.parents: set[int] = set()
        self.cancel_trees: set[int] = set()
        self._prune_at = 1024

    def _producer(self, oid: int) -> Task | None:
        task = self.tasks.producer(oid)
        if task is None and self.lineage.rebuilding:
            rebuild = self.lineage.rebuilding.get(oid)
            if rebuild is not None:
                return self._tasks.get(rebuild)
        return task

    def _actor_ref(self, oid: int, delta: int) -> bool:
        return self.actors.handle_ref(oid, delta)

    # ---------------------------------------------------------------- clients
    def client_joined(self, client: Client) -> None:
        if client.kind == P.KIND_DRIVER:
            self.notices.jobs[client.client_no] = client

    def client_left(self, client: Client) -> None:
        self.objects.release_grants(client)
        if client.kind == P.KIND_DRIVER:
            self.notices.jobs.pop(client.client_no, None)
            self.stepper.job_ended(client.client_no)
            self.actors.driver_left(client.client_no)
            self._cancel_job(client.client_no)
            self.io.to_head("group_job_ended", client.client_no)  # its groups go (Ray's rule)
        holds = client.holds
        client.holds = set()
        for oid in holds:
            self.objects.decref(oid)

    def refs(self, client: Client, ops: Iterable[tuple[int, int]]) -> None:
        self.objects.refs(client, ops)

    # ---------------------------------------------------------------- objects
    def put(self, client: Client, oid: int, blob: bytes | None, shm_size: int,
            contained: tuple[int, ...], offset: int = -1) -> None:
        self.objects.put(client, oid, blob, shm_size, contained, offset)

    def get_request(self, client: Client, oids: Iterable[int], coming: bool = False) -> None:
        self.objects.get_request(client, oids, coming)

    def reserve(self, client: Client, oid: int, size: int) -> str | None:
        return self.objects.reserve(client, oid, size)

    def direct_result(self, client: Client, task_id: int, job: int, locs: list,
                      t0: float, t1: float) -> None:
        """A driver's direct call (see `nbdist.driver.direct`; never submitted here) ended on the
        worker of ``client`` with results this node must hold (in shared memory, or holding
        refs): store them for that driver and tell it, as for a call that ran through here."""
        owner = self.notices.jobs.get(job)
        self.objects.store_direct(client, owner, job, locs)
        if owner is not None:
            self.objects.lease(owner, locs)
            self.io.send(owner, (P.DONE, task_id, True, locs, t0, t1, client.pid))

    # ---------------------------------------------------------------- tasks
    def register_fn(self, fid: int, data: bytes) -> None:
        self.tasks.fns[fid] = data

    def submit(self, client: Client, spec: tuple, forwarded: bool = False) -> None:
        task = Task(spec, client)
        task.no_forward = forwarded
        self._tasks[task.id] = task
        job = spec[P.S_JOB]
        objs = self._objs
        holds = client.holds
        for rid in task.return_ids:
            obj = objs.get(rid)
            if obj is None:
                obj = objs[rid] = Obj()
            obj.owner_job = job
            if rid not in holds:  # (a resubmitted direct call's may be held already)
                holds.add(rid)
                obj.count += 1
        self.tasks.pin(spec)
        actor_id = spec[P.S_ACTOR]
        if actor_id:
            if spec[P.S_METHOD] == P.ACTOR_INIT:
                self.actors.create(spec, client, forwarded)
            elif not self.actors.route_call(task, forwarded):
                return
        if client.kind == P.KIND_WORKER:
            self.parents.add(spec[P.S_PARENT])
            self.notices.event(job, ev.TaskSubmitted, (
                task.id, spec[P.S_NAME], spec[P.S_DEPS], task.return_ids,
                spec[P.S_PARENT] or None, actor_id or None, None))
        missing = 0
        for dep in spec[P.S_DEPS]:
            obj = objs[dep]
            if obj.state != READY:
                obj.waiting.append(task)
                missing += 1
                self.objects.fetch_if_foreign(dep)
        task.missing = missing
        if missing == 0:
            self._deps_ready(task)
        if self.cancel_trees and client.kind == P.KIND_WORKER:
            self.child_submitted(task)

    def _deps_ready(self, task: Task) -> None:
        """Every argument of ``task`` is here: fail it (an argument failed), place it
        elsewhere, park or fail it (this node cannot run it), or queue it."""
        if task.finished:
            return
        spec = task.spec
        objs = self._objs
        for dep in spec[P.S_DEPS]:
            obj = objs[dep]
            if obj.error:
                assert obj.blob is not None
                self.tasks.finish_error(task, obj.blob)
                return
        method = spec[P.S_METHOD]
        placement = self.placement
        if method is None or method == P.ACTOR_INIT:
            shape = task.placement_shape
            if not placement.feasible(shape):
                self._not_here(task, shape)
                return
            if placement.parked:
                placement.parked.pop(task.id, None)
        if (self.stepper.jobs and method != P.ACTOR_INIT and not self._machinery(task)
                and self.stepper.hold(task)):
            return
        self._go(task)

    def _machinery(self, task: Task) -> bool:
        """A call to one of nbdist's own actors (a namespace "_nbdist…", as the metrics
        aggregator's): it serves the tools, not the lesson, so step mode never holds it."""
        actor_id = task.spec[P.S_ACTOR]
        actor = self.actors.by_id.get(actor_id) if actor_id else None
        return actor is not None and actor.namespace.startswith("_nbdist")

    def _go(self, task: Task) -> None:
        """``task`` may start: queue it (an actor call: mark it ready in its actor's queue)."""
        task.ready = True
        spec = task.spec
        actor_id = spec[P.S_ACTOR]
        if not actor_id:
            self.placement.enqueue(task)
        elif spec[P.S_METHOD] == P.ACTOR_INIT:
            self.placement.queue_actor(self.actors.by_id[actor_id])
        else:
            self.actors.pump(self.actors.by_id[actor_id])

    def step(self, client: Client, on: bool | None, release: int | str) -> tuple[dict, list[Task]]:
        """A driver's step-through command (see `nbdist.scheduler.stepping`)."""
        return self.stepper.command(client.client_no, on, release)

    def _not_here(self, task: Task, shape: Shape) -> None:
        """This node has not the resources ``task`` (a task or actor constructor) needs."""
        placement = self.placement
        if not task.no_forward:
            index = placement.remote_for(shape, need_free=False)
            if index:
                placement.parked.pop(task.id, None)
                if task.spec[P.S_METHOD] is None:
                    placement.forward(task, index)
                else:
                    self.actors.host(self.actors.by_id[task.spec[P.S_ACTOR]], task, index)
                return
            if placement.park(task):  # nodes can join this cluster: wait for one with it
                return
            if not task.spec[P.S_ACTOR]:
                unpinned = without_soft_pins(shape)
                if unpinned is not shape:  # its node is gone: anywhere will do
                    task.shape = unpinned
                    self._deps_ready(task)
                    return
        self._infeasible(task, shape)

    def _infeasible(self, task: Task, shape: tuple[tuple[str, float], ...]) -> None:
        ended = self.bundles.why_not(shape)
        if ended is not None:
            self._group_ended(task, ended)
            return
        need = ", ".join(_amount(n, a) for n, a in shape)
        have = ", ".join(_amount(n, a) for n, a in sorted(self.placement.total.items())
                         if not n.startswith("node:"))
        where = ("the cluster has only" if not self.placement.remote
                 else "no node has it; this one has")
        self.tasks.finish_error(task, system_error_blob(ValueError(
            f"{task.spec[P.S_NAME]!r} needs {{{need}}} but {where} {{{have}}}. Ask for fewer "
            "resources, or start the cluster with more (init(num_cpus=..., num_gpus=..., "
            "resources={...}), or a node with them: nbdist start --address ...).")))
        actor = self.actors.by_id.get(task.spec[P.S_ACTOR]) if task.spec[P.S_ACTOR] else None
        if actor is not None and task.spec[P.S_METHOD] == P.ACTOR_INIT:
            self.actors.gone(actor, "no node can place it")

    def expire_parked(self, now: float) -> None:
        """Fail the tasks no node could take within the wait."""
        for task in self.placement.expired(now, self._tasks):
            self._infeasible(task, task.placement_shape)

    # ---------------------------------------------------------------- dispatch
    def dispatch(self) -> None:
        """Start queued work where resources and workers allow (called once per loop turn)."""
        placement = self.placement
        placement.need_dispatch = False
        if placement.pending_actors:
            self._start_actors()
        fits = placement.fits
        take_idle = self.workers.take_idle
        for shape, queue in placement.ready.items():
            gpu = bool(queue) and any(n == "GPU" or n.startswith("GPU_group_") for n, _ in shape)
            while queue:
                task = queue[0]
                if task.finished:
                    queue.popleft()
                    continue
                extra = task.spec[P.S_EXTRA]
                env = extra["runtime_env"]["key"] if extra and extra.get("runtime_env") else ""
                worker = take_idle(env, gpu) if fits(shape) else None
                if worker is None:
                    if placement.remote:
                        placement.spillback(queue, shape)
                    break
                queue.popleft()
                self._assign(task, worker)
        self.workers.reap_idle()

    def _start_actors(self) -> None:
        placement = self.placement
        pending = placement.pending_actors
        while pending:
            actor = pending[0]
            shape = actor.spec[P.S_RESOURCES] or ()
            place = _placement_shape(actor, shape)
            if not (placement.fits(shape) and placement.feasible(place)):
                index = (placement.remote_for(place, need_free=True)
                         or placement.remote_for(place, need_free=False)) if (
                    placement.remote and place) else 0
                if not index:
                    break
                pending.popleft()
                self.actors.host(actor, self.actors.init_task(actor), index)
                continue
            worker = self.io.spawn_worker(actor=True)
            if worker is None:
                break
            pending.popleft()
            actor.held = shape
            actor.gpus = placement.acquire(shape)
            self.actors.start(actor, worker)

    def _assign(self, task: Task, worker: Worker) -> None:
        task.gpus = self.placement.acquire(task.shape)
        task.held = task.shape
        task.worker = worker
        task.attempt += 1
        task.dispatched_at = time.time()
        worker.to("busy")
        worker.task = task
        self.tasks.exec(worker, task)

    # ---------------------------------------------------------------- results
    def result(self, worker: Worker, task_id: int, ok: bool, locs: list, error: bytes | None,
               t0: float, t1: float, contained: tuple[int, ...] = ()) -> None:
        client = worker.client
        if client is not None and client.reserved:
            for loc in locs:
                self.objects.unreserve(client, loc[0])
        task = self._tasks.get(task_id)
        if task is None:
            self.objects.drop_unstored(locs)
            return
        actor = worker.actor
        if actor is not None:
            actor.inflight.pop(task_id, None)
        elif worker.task is task:
            worker.task = None
            self._worker_free(worker, task)
        if task.finished:
            self.objects.drop_unstored(locs)
            return
        if actor is not None and task.spec[P.S_METHOD] == P.ACTOR_INIT:
            self.actors.init_done(actor, ok, error)
        if task.cancelled and not ok:
            # As Ray's: a cancel that stopped it running is an error of the task itself.
            error = error_blob(task.spec[P.S_NAME], TaskCancelledError(
                f"Task {task.spec[P.S_NAME]!r} was cancelled."), worker.pid, f"{task_id:x}",
                _no_frames)
        if not ok and error is not None and self.tasks.may_retry(task, error):
            self._requeue(task)
            return
        if task.owner.kind == P.KIND_NODE and task.spec[P.S_EXTRA]:
            self._send_rebuilt(task)
        if ok:
            self.tasks.finish(task, locs, t0, t1, worker.pid)
        else:
            assert error is not None
            self.tasks.finish_error(task, error, t0, t1, worker.pid)

    def _worker_free(self, worker: Worker, task: Task) -> None:
        shape = task.held
        if worker.blocked:
            shape = tuple((n, a) for n, a in shape if n != "CPU")
            worker.blocked = False
        placement = self.placement
        placement.release(shape, task.gpus)
        task.held = ()
        task.gpus = []
        self.workers.done(worker)
        placement.need_dispatch = True

    def _requeue(self, task: Task) -> None:
        task.worker = None
        if task.spec[P.S_ACTOR]:
            self.actors.requeue(task)
        elif not task.no_forward and not self.placement.feasible(task.shape):
            # It ran on another node (now lost) because only that node had its resources:
            # place it again as a new task would be (another node, a wait, or a clear error).
            task.ready = False
            self._deps_ready(task)
        else:
            self.placement.requeue(task)

    def _lost_run(self, task: Task, cancelled_note: str, reason: str, crash_text: str,
                  error: type[Exception] = WorkerCrashedError) -> None:
        """The process running ``task`` is gone: it runs again while retries last, else
        fails with ``error(crash_text)``; a cancelled one just ends."""
        if task.cancelled:
            self.tasks.finish_error(task, system_error_blob(TaskCancelledError(
                f"Task {task.spec[P.S_NAME]!r} was cancelled{cancelled_note}.")))
        elif task.retries_left > 0:
            self.tasks.retried(task, reason)
            self._requeue(task)
        else:
            self.tasks.finish_error(task, system_error_blob(error(crash_text)))

    # ---------------------------------------------------------------- blocking in get
    def blocked(self, worker: Worker) -> None:
        task = worker.task
        if task is None or worker.blocked:
            return
        worker.blocked = True
        self.placement.lend_cpu(sum(a for n, a in task.held if n == "CPU"))
        self.placement.need_dispatch = True

    def unblocked(self, worker: Worker) -> None:
        task = worker.task
        if task is None or not worker.blocked:
            return
        worker.blocked = False
        self.placement.lend_cpu(-sum(a for n, a in task.held if n == "CPU"))

    # ---------------------------------------------------------------- cancel
    def _cancel_job(self, job: int) -> None:
        """The job's driver is gone (exited, interrupted or killed): nobody can use what its
        tasks would make, so those still waiting or running here end, their workers killed (an
        interrupt could be caught). Its actors' calls end with the actors (`driver_left`)."""
        for task in list(self._tasks.values()):
            if not task.finished and task.spec[P.S_JOB] == job and not task.spec[P.S_ACTOR]:
                self._cancel_task(task, task.return_ids[0] if task.return_ids else 0, True)

    def cancel(self, oid: int, force: bool, recursive: bool = True) -> None:
        """Cancel the task returning ``oid``; ``recursive``: the tasks it submitted here
        too, and those they submitted (as Ray's ``cancel(recursive=True)``), and any it
        submits until it ends (`child_submitted`)."""
        task = self.tasks.producer(oid)
        if task is None:
            # A borrowed ref: a task on the node of its owner made it there.
            index = oid >> (CLIENT_SHIFT + NODE_SHIFT)
            if index not in (0, self.node_index):
                self.io.to_node(index, (P.CANCEL, oid, force, recursive))
            return
        if task.finished:
            return
        if recursive:
            self._prune()
            self.cancel_trees.add(task.id)
            if task.id in self.parents:
                self._cancel_children(task.id, force)
        self._cancel_task(task, oid, force, recursive)

    def cancel_children_of(self, task_id: int, force: bool) -> None:
        """A direct actor call ``task_id`` (which this node does not run) was cancelled
        recursively: the tasks it submitted here end, and those it submits until it ends."""
        self._prune()
        self.cancel_trees.add(task_id)
        self._cancel_children(task_id, force)

    def _prune(self) -> None:
        """Drop ended tasks from `parents` and `cancel_trees` once they have doubled since
        the last time (so cancelling many tasks one by one stays linear)."""
        if len(self.parents) + len(self.cancel_trees) < self._prune_at:
            return
        tasks = self._tasks
        self.parents = {t for t in self.parents if t in tasks}
        self.cancel_trees = {t for t in self.cancel_trees if t in tasks}
        self._prune_at = 2 * (len(self.parents) + len(self.cancel_trees)) + 1024

    def _cancel_children(self, parent: int, force: bool) -> None:
        children: dict[int, list[Task]] = {}
        for t in self._tasks.values():
            if not t.finished and t.spec[P.S_PARENT]:
                children.setdefault(t.spec[P.S_PARENT], []).append(t)
        todo = list(children.get(parent, ()))
        while todo:
            child = todo.pop()
            self.cancel_trees.add(child.id)
            todo.extend(children.get(child.id, ()))
            self._cancel_task(child, child.id + 1, force)

    def child_submitted(self, task: Task) -> None:
        """``task`` was submitted by a task being cancelled recursively: cancel it too."""
        if task.spec[P.S_PARENT] in self.cancel_trees and not task.finished:
            self.cancel_trees.add(task.id)
            self._cancel_task(task, task.id + 1, False)

    def _cancel_task(self, task: Task, oid: int, force: bool, recursive: bool = True) -> None:
        task.cancelled = True
        if task.remote:
            self.io.to_node(task.remote, (P.CANCEL, oid, force, recursive))
            return
        err = system_error_blob(TaskCancelledError(
            f"Task {task.spec[P.S_NAME]!r} was cancelled."))
        if task.spec[P.S_ACTOR]:
            self.actors.cancel(task, err)
            return
        worker = task.worker
        if worker is None:
            # Waiting for dependencies or queued: the queues skip finished tasks.
            self.tasks.finish_error(task, err)
        elif force:
            self.io.kill_worker(worker)
        else:
            # The worker's main thread runs the task and is not reading messages: signal it.
            self.io.interrupt_worker(worker)

    # ---------------------------------------------------------------- workers
    def worker_started(self, worker: Worker) -> None:
        self.workers.started(worker)
        self.placement.need_dispatch = True

    def worker_lost(self, worker: Worker, exit_code: int | None) -> None:
        if not self.workers.lost(worker):
            return
        how = exit_text(exit_code)
        task = worker.task
        worker.task = None
        if task is not None and not task.finished:
            self._worker_free(worker, task)
            name = task.spec[P.S_NAME]
            retries = task.spec[P.S_MAX_RETRIES]
            if worker.oom:  # killed by the node's memory monitor
                self._lost_run(
                    task, " (its worker was stopped)", f"out of memory: {worker.oom}",
                    f"Task {name!r} failed: {worker.oom}; no retries left (max_retries="
                    f"{retries}). Lower the memory the task uses, run fewer at once "
                    "(num_cpus= or memory=), or raise memory_usage_threshold.",
                    OutOfMemoryError)
            else:
                self._lost_run(
                    task, " (its worker was stopped)", f"worker pid={worker.pid} {how}",
                    f"The worker (pid={worker.pid}) running task {name!r} {how}; no retries "
                    f"left (max_retries={retries}). If the process ran out of memory, lower "
                    "the memory the task uses or give it more resources.")
        if worker.actor is not None:
            self.actors.worker_lost(worker.actor, worker, how)
        if worker.client is not None:
            # (Not for a worker the pool stopped while idle: only a lost one is a lost owner.)
            self.actors.creator_left(worker.client.client_no)
        self.notices.everyone(ev.WorkerDown, (self.notices.node_id, worker.pid, how))
        self.placement.need_dispatch = True

    # ---------------------------------------------------------------- actors
    def kill_actor(self, actor_id: int, no_restart: bool, why: str | None = None) -> None:
        self.actors.kill(actor_id, no_restart, why)

    def hosted_actor_event(self, index: int, actor_id: int, what: str, reason: str) -> None:
        self.actors.hosted_event(index, actor_id, what, reason)

    # ---------------------------------------------------------------- other nodes
    def set_cluster_view(self, view: dict[int, dict[str, Any]]) -> None:
        """The other nodes as the head reports them; parked tasks try again."""
        self._unpark(self.placement.set_cluster_view(view))

    def _unpark(self, task_ids: list[int]) -> None:
        for task_id in task_ids:
            task = self._tasks.get(task_id)
            if task is None or task.finished:
                self.placement.parked.pop(task_id, None)
            else:
                self._deps_ready(task)

    def accept_forward(self, peer: Client, spec: tuple, dep_locs: list) -> None:
        """Node ``peer`` asks us to run a task; ``dep_locs`` are local copies of its
        arguments, held for it until the task ends."""
        self.objects.hold_copies(peer, dep_locs)
        self.submit(peer, spec, forwarded=True)

    def value_arrived(self, loc: tuple) -> None:
        self.objects.value_arrived(loc)

    def remote_node_id(self, index: int) -> str:
        """The id of node ``index`` as its own records name it (its index and pid)."""
        info = self.placement.remote.get(index)
        return f"{index:04x}{info.get('pid', 0):08x}" if info else ""

    def remote_started(self, index: int, items: list[tuple[int, int]], t: float) -> None:
        """Tasks forwarded to node ``index`` began there: (task id, worker pid) each; their
        owners hear where they run."""
        by_owner: dict[Client, list[tuple[int, int, str]]] = {}
        where = self.remote_node_id(index)
        for tid, pid in items:
            task = self._tasks.get(tid)
            if task is not None and not task.finished:
                by_owner.setdefault(task.owner, []).append((tid, pid, where))
                if task.owner.kind == P.KIND_WORKER:
                    self.notices.event(task.spec[P.S_JOB], ev.TaskStarted,
                                       (tid, task.spec[P.S_NAME], where, pid))
        for owner, started in by_owner.items():
            self.io.send(owner, (P.STARTED, started, t))

    def remote_result(self, index: int, task_id: int, ok: bool, locs: list, t0: float,
                      t1: float, pid: int) -> None:
        """A task forwarded to node ``index`` ended there; ``locs`` are local copies."""
        task = self._tasks.get(task_id)
        if task is None or task.finished or task.remote != index:
            for loc in locs:
                if loc[2]:
                    self.io.unlink(loc[0])
            return
        task.remote = 0
        self.objects.borrow_contained(index, locs)
        if task.spec[P.S_METHOD] == P.ACTOR_INIT:
            actor = self.actors.by_id.get(task.spec[P.S_ACTOR])
            if actor is not None and actor.remote == index and actor.state != "dead":
                if not ok:
                    actor.remote = 0  # its node dropped it already
                self.actors.init_done(actor, ok, locs[0][1] if locs else None)
        where = self.remote_node_id(index)
        if ok:
            if task.spec[P.S_EXTRA] and "generator" in task.spec[P.S_EXTRA]:
                self.lineage.record(task.spec, index, locs)
                self.tasks.finish(task, locs, t0, t1, pid, where)
                self.lineage.settle(task.id)
                return
            self.tasks.finish(task, locs, t0, t1, pid, where)
            return
        error = locs[0][1] if locs else system_error_blob(RuntimeError("the task failed"))
        if self.tasks.may_retry(task, error):
            self._requeue(task)
            return
        self.tasks.finish_error(task, error, t0, t1, pid, where)

    def node_lost(self, index: int) -> None:
        """Node ``index`` is gone: its forwarded tasks run again (while retries last), our
        actors there restart elsewhere (while restarts last), and what we were fetching from
        it is lost."""
        self.placement.node_lost(index)
        self.objects.lost_nodes.add(index)
        restarting = self.actors.node_lost(index)
        lost_calls: dict[int, list[Task]] = {}
        for task in [t for t in self._tasks.values() if t.remote == index and not t.finished]:
            task.remote = 0
            actor_id = task.spec[P.S_ACTOR]
            if actor_id in restarting:
                if task.spec[P.S_METHOD] != P.ACTOR_INIT:
                    lost_calls.setdefault(actor_id, []).append(task)
            elif actor_id:
                self.tasks.finish_error(task, system_error_blob(ActorDiedError(
                    f"The actor {actor_id:x} cannot run the call {task.spec[P.S_NAME]!r}: its "
                    f"node ({index}) was lost.", f"{actor_id:x}")))
            else:
                self._lost_run(
                    task, "", f"node {index} running it was lost",
                    f"The node running task {task.spec[P.S_NAME]!r} was lost; no retries "
                    f"left (max_retries={task.spec[P.S_MAX_RETRIES]}).")
        self._rebuild_lost(index)
        self.objects.node_lost(index)
        for actor in restarting.values():
            self.actors.restart_elsewhere(actor, lost_calls.get(actor.id, []), index)

    def _rebuild_lost(self, index: int) -> None:
        """Generator values lost with node ``index`` are made again by running their task
        here (`nbdist.scheduler.lineage`), while its retries last."""
        if not self.lineage.records:
            return
        specs, unbuildable = self.lineage.lost(index)
        for oid in unbuildable:
            self.objects.fail(oid, self._objs[oid], ObjectLostError(
                f"Object {oid:x} was lost with node {index}, and the generator task that "
                "made it has no retries left to make it again (max_retries)."))
        for spec in specs:
            shape = spec[P.S_RESOURCES]
            if shape is not None:  # (a soft pin to the lost node does not hold any more)
                spec = (*spec[:P.S_RESOURCES], without_soft_pins(shape),
                        *spec[P.S_RESOURCES + 1:])
            original = spec[P.S_EXTRA]["rebuilds"]
            self.notices.event(spec[P.S_JOB], ev.TaskRetried, (
                original, spec[P.S_NAME], 2,
                f"its values were lost with node {index}: it runs again to make them"))
            self.submit(self.lineage.owner, spec)

    def _send_rebuilt(self, task: Task) -> None:
        """A task another node asked us to run to rebuild values ended here: the values it
        stored go to that node ahead of its end (they are that node's to keep)."""
        for oid in task.spec[P.S_EXTRA].get("rebuild") or ():
            loc = self.objects.loc(oid) if oid else None
            if loc is not None:
                self.io.send(task.owner, (P.OBJ, loc))

    def _rebuilt(self, task: Task, error: bytes | None) -> None:
        """A task run to rebuild lost values ended: those it did not make fail."""
        for oid in self.lineage.ended(task.spec):
            obj = self._objs[oid]
            if error is None:  # as Ray: the task's error (RayTaskError), here a ValueError
                name = task.spec[P.S_NAME]
                error = error_blob(name, ValueError(
                    f"Object {oid:x} was lost with its node, and running {name!r} again to "
                    "make it did not: its generator yielded fewer values than before."),
                    0, f"{task.id:x}", _no_frames)
            self.objects.store(oid, obj, (oid, error, 0), ())

    # ---------------------------------------------------------------- placement groups
    def group_message(self, msg: tuple) -> tuple | None:
        """A ``GROUP`` message from the head; the reply to send it, if any."""
        op, pg = msg[1], msg[2]
        if op == "prepare":
            return (pg, msg[3], self.node_index, self.group_prepare(pg, msg[3], msg[4], msg[5]))
        if op == "commit":
            self.group_commit(pg, msg[3])
        elif op == "cancel":
            self.group_cancel(pg, msg[3])
        elif op == "remove":
            self.group_remove(pg, msg[3])
        return None

    def group_prepare(self, pg: str, attempt: int, bundles: list, commit: bool) -> bool:
        """Phase one of placing bundles of group ``pg`` here (see `bundles`); with
        ``commit``, both phases at once (every bundle of the attempt is here)."""
        if not self.bundles.prepare(pg, attempt, [(i, dict(r)) for i, r in bundles]):
            self.io.resources_changed()  # the head's view was stale: report what is free
            return False
        if commit:
            self.group_commit(pg, attempt)
        return True

    def group_commit(self, pg: str, attempt: int) -> None:
        if self.bundles.commit(pg, attempt):
            self._unpark(list(self.placement.parked))

    def group_cancel(self, pg: str, attempt: int) -> None:
        self.bundles.cancel(pg, attempt)

    def group_remove(self, pg: str, reason: str) -> None:
        """Group ``pg`` is gone: its resources come back, what ran or waited in it ends."""
        self.bundles.remove(pg, reason)
        placement = self.placement
        for task_id in list(placement.parked):
            task = self._tasks.get(task_id)
            if task is not None and group_of(task.placement_shape) == pg:
                del placement.parked[task_id]
                self._infeasible(task, task.placement_shape)
        for shape in [s for s in placement.ready if group_of(s) == pg]:
            for task in placement.ready.pop(shape):  # (its queue would stay forever)
                if not task.finished:
                    self._group_ended(task, reason)
        for worker in list(self.workers.workers.values()):
            task = worker.task
            if task is not None and not task.finished and group_of(task.held) == pg:
                self._group_ended(task, reason)
                self.placement.release(task.held, task.gpus)  # the GPU ids come back
                task.held, task.gpus = (), []
                self.io.kill_worker(worker)
        for actor in list(self.actors.by_id.values()):
            if actor.state != "dead" and not actor.remote and actor.spec and group_of(
                    actor.spec[P.S_RESOURCES] or ()) == pg:
                actor.killed = True
                self.actors.gone(actor, reason)

    def _group_ended(self, task: Task, reason: str) -> None:
        if task.spec[P.S_ACTOR] and task.spec[P.S_METHOD] == P.ACTOR_INIT:
            actor = self.actors.by_id.get(task.spec[P.S_ACTOR])
            if actor is not None:
                actor.killed = True
                self.actors.gone(actor, reason)
                return
        self.tasks.finish_error(task, system_error_blob(TaskPlacementGroupRemoved(
            f"Task {task.spec[P.S_NAME]!r} cannot run: {reason}.")))

    # ---------------------------------------------------------------- notices and views
    @property
    def need_dispatch(self) -> bool:
        return self.placement.need_dispatch

    def has_notices(self) -> bool:
        return self.notices.pending()

    def flush_notices(self) -> None:
        self.notices.flush()

    def task_name(self, task_id: int) -> tuple[str, int]:
        return self.tasks.name_of(task_id)

    def snapshot(self) -> dict:
        objects = self.objects
        return {
            "total": dict(self.placement.total),
            "available": {k: max(0.0, v) for k, v in self.placement.avail.items()},
            "workers": len(self.workers),
            "tasks": len(self.tasks),
            "objects": len(objects),
            "store_used": objects.store_used,
            "store_capacity": objects.capacity,
            "spilled": objects.spilled_used,
            "spills": objects.spill_count,
            "restores": objects.restore_count,
            "actors": self.actors.live(),
        }


def _amount(name: str, amount: float) -> str:
    """``name: amount`` as people read it: the memory resources are bytes (B to GiB)."""
    if "memory" not in name:
        return f"{name}: {amount:g}"
    power = min(3, max(0, (int(amount).bit_length() - 1) // 10))
    unit = ("B", "KiB", "MiB", "GiB")[power]
    return f"{name}: {amount / 1024**power:.{1 if power else 0}f} {unit}"


def _no_frames(filename: str) -> bool:
    """The node adds no traceback of its own to an error it makes."""
    return True


def _placement_shape(actor: Any, shape: Shape) -> Shape:
    """What a node must have to be given ``actor``: its shape, plus one CPU for an actor that
    asked for no resources (Ray places those only where a CPU is, though they hold none)."""
    extra = actor.spec[P.S_EXTRA] or {}
    if not extra.get("place_cpu"):
        return shape
    need = dict(shape)
    need["CPU"] = need.get("CPU", 0.0) + float(extra["place_cpu"])
    return tuple(sorted(need.items()))

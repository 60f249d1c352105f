"""NodeState's actors (see `nbdist.scheduler`): placement, start, calls in order, restarts,
death and kill, on this node or hosted by another. Plain functions taking the state, bound as
NodeState methods in its class body.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import protocol as P
from .exceptions import ActorDiedError
from .sched_records import Actor, Client, Obj, Task, Worker, _NullClient
from .serialization import error_text, system_error_blob

if TYPE_CHECKING:
    from .scheduler import NodeState


def _start_actor(self: NodeState, actor: Actor, worker: Worker) -> None:
    worker.state = "actor"
    worker.actor = actor
    actor.worker = worker
    actor.state = "pending"
    init = self._init_task(actor)
    actor.inflight[init.id] = init
    init.worker = worker
    self._exec(worker, init)
    self._pump(actor)


def _init_task(self: NodeState, actor: Actor) -> Task:
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


def _host_actor(self: NodeState, actor: Actor, init: Task, index: int) -> None:
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


def hosted_actor_event(self: NodeState, index: int, actor_id: int, what: str, reason: str) -> None:
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


def _pump(self: NodeState, actor: Actor) -> None:
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


def _maybe_retire(self: NodeState, actor: Actor) -> None:
    if actor.state == "dead" or actor.queue or len(actor.inflight) > 0:
        return
    self._actor_gone(actor, "all handles to it went out of scope", no_restart=True,
                     graceful=True)


def kill_actor(self: NodeState, actor_id: int, no_restart: bool) -> None:
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


def _actor_worker_lost(self: NodeState, actor: Actor, worker: Worker, how: str) -> None:
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


def _calls_lost_in_restart(self: NodeState, actor: Actor, lost: list[Task], how: str) -> None:
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


def _actor_gone(self: NodeState, actor: Actor, reason: str, no_restart: bool,
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


def _dead_error(self: NodeState, actor: Actor | None, actor_id: int, reason: str | None = None
                ) -> ActorDiedError:
    reason = reason or self._dead_reasons.get(actor_id) or "it is no longer alive"
    return ActorDiedError(
        f"The actor {actor_id:x} cannot run the call: {reason}.", f"{actor_id:x}")


def _lost_call_may_run(self: NodeState, actor: Actor, task: Task) -> bool:
    """A driver resubmits a direct call whose link broke (``extra = {"lost_on": pid,
    "attempt": n}``, see `nbdist.direct`): it may have run when the actor's process pid died.
    While this node has not seen that death the call is in flight like the others; once it
    has, the call runs again only as ``max_task_retries`` allows (else it fails here)."""
    extra = task.spec[P.S_EXTRA]
    pid = extra.get("lost_on", 0)
    worker = actor.worker
    if actor.remote or not actor.spec or (worker is not None and worker.pid == pid):
        return True
    task.attempt = int(extra.get("attempt", 1))
    retries = (actor.spec[P.S_EXTRA] or {}).get("max_task_retries", 0)
    if retries == -1 or task.attempt <= retries:
        return True
    self._finish_error(task, system_error_blob(ActorDiedError(
        f"The actor {actor.id:x} died while running this call (its process pid={pid} "
        "ended); it is restarting. Set max_task_retries to retry calls.", f"{actor.id:x}")))
    return False


def direct_result(self: NodeState, client: Client, task_id: int, job: int, locs: list,
                  t0: float, t1: float) -> None:
    """A driver's direct call (see `nbdist.direct`; never submitted here) ended on the worker
    of ``client`` with results this node must hold (in shared memory, or holding refs):
    store them for that driver and tell it, as for a call that ran through the node."""
    owner = self.jobs.get(job)
    for loc in locs:
        oid = loc[0]
        self._unreserve(client, oid)
        obj = self.objects.get(oid)
        if obj is None:
            obj = self.objects[oid] = Obj()
        obj.owner_job = job
        if owner is not None and oid not in owner.holds:
            owner.holds.add(oid)
            obj.count += 1
        self._store(oid, obj, loc[:3], loc[3] if len(loc) > 3 else ())
    if owner is not None:
        self.io.send(owner, (P.DONE, task_id, True, locs, t0, t1, client.pid))

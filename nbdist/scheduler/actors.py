"""The actor table: the actors this node owns or hosts, and stand-ins for other nodes' actors
(layer L1).

Owns ``by_id`` (actor id -> `Actor`) and why dead actors died (``dead_reasons``, for the error
of a later call). An actor runs in a worker process of its own here, or on another node
(``Actor.remote``: its constructor and calls are forwarded there, in order, and that node
restarts the process while restarts remain and reports each restart and the end). Calls are
dispatched in submission order as their arguments become ready (``queue``), per caller (a
process here, or a task on another node): a call of one caller does not wait for another
caller's call that waits for its arguments; a concurrent actor's calls wait for none. The
ones sent and not ended are ``inflight``. A handle is a reference (``Actor.count``, kept by the
object table through `handle_ref`): when none is left, a non-detached actor exits after its
queued calls.

Life (see `states` for the allowed moves): pending until its constructor returns, then alive;
when its process (or its node) is lost it restarts while ``max_restarts`` allows (-1, kept in
``restarts_left``: no limit), the calls that were running going back to the front of its
queue as ``max_task_retries`` allows (else failing with ActorDiedError); dead is final and
fails every queued and later call.

Tasks end through the task table; what to run next is placement's; ``place(task)`` (the node
state's) places an actor's constructor again after its node was lost.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

from nbdist import events as ev
from nbdist.exceptions import ActorDiedError
from nbdist.scheduler.notices import Notices
from nbdist.scheduler.placement import Placement
from nbdist.scheduler.records import (
    MANY_CALLERS,
    NULL_CLIENT,
    Actor,
    Client,
    NodeIO,
    Task,
    Worker,
)
from nbdist.scheduler.tasks import TaskTable
from nbdist.wire import protocol as P
from nbdist.wire.serialization import error_text, system_error_blob


class ActorTable:
    def __init__(self, io: NodeIO, node_index: int, tasks: TaskTable, placement: Placement,
                 notices: Notices, place: Callable[[Task], None]) -> None:
        self.io = io
        self.node_index = node_index
        self.tasks = tasks
        self.placement = placement
        self.notices = notices
        self.place = place
        self.by_id: dict[int, Actor] = {}
        self.dead_reasons: dict[int, str] = {}
        self.kill_reasons: dict[int, str] = {}  # killed, not yet gone: why, if not kill()

    def live(self) -> int:
        return sum(1 for a in self.by_id.values() if a.state != "dead" and not a.remote)

    # ---------------------------------------------------------------- submission
    def create(self, spec: tuple, client: Client, forwarded: bool) -> None:
        actor = Actor(spec, spec[P.S_JOB])
        if forwarded and client.kind == P.KIND_NODE:
            actor.host_for = client.node_index
        self.by_id[actor.id] = actor
        if client.kind == P.KIND_WORKER:
            actor.creator = client.client_no
        # The creating process holds the actor through its handle.
        actor.count += 1
        client.holds.add(actor.id)

    def route_call(self, task: Task, forwarded: bool) -> bool:
        """Queue a method call on its actor (a stand-in routes it to the owner node); False
        if it ended at once (the actor is dead, or a resubmitted call may not run again)."""
        actor_id = task.spec[P.S_ACTOR]
        target = self.by_id.get(actor_id)
        owner = actor_id >> P.OWNER_SHIFT
        if target is None and owner not in (0, self.node_index) and not forwarded:
            target = self.by_id[actor_id] = Actor.stand_in(actor_id, owner)
        if target is None or target.state == "dead":
            self.tasks.finish_error(task, system_error_blob(self.dead_error(actor_id)))
            return False
        if task.spec[P.S_EXTRA] and not self._lost_call_may_run(target, task):
            return False
        if not target.unordered and target.caller is not MANY_CALLERS:
            caller = _caller(task)
            if caller != target.caller:
                target.caller = caller if target.caller is None else MANY_CALLERS
        target.queue.append(task)
        return True

    def _lost_call_may_run(self, actor: Actor, task: Task) -> bool:
        """A driver resubmits a direct call whose link broke (``extra = {"lost_on": pid,
        "attempt": n}``, see `nbdist.driver.direct`): it may have run when the actor's process pid
        died. While this node has not seen that death the call is in flight like the others;
        once it has, the call runs again only as ``max_task_retries`` allows (else it fails)."""
        extra = task.spec[P.S_EXTRA]
        pid = extra.get("lost_on", 0)
        worker = actor.worker
        if actor.remote or not actor.spec or (worker is not None and worker.pid == pid):
            return True
        task.attempt = int(extra.get("attempt", 1))
        retries = (actor.spec[P.S_EXTRA] or {}).get("max_task_retries", 0)
        if retries == -1 or task.attempt <= retries:
            return True
        self.tasks.finish_error(task, system_error_blob(ActorDiedError(
            f"The actor {actor.id:x} died while running this call (its process pid={pid} "
            "ended); it is restarting. Set max_task_retries to retry calls.", f"{actor.id:x}")))
        return False

    def handle_ref(self, oid: int, delta: int) -> bool:
        """A handle to actor ``oid`` was taken (+1) or dropped (-1); False if not an actor."""
        actor = self.by_id.get(oid)
        if actor is None:
            return False
        actor.count += delta
        if delta < 0 and actor.count <= 0 and not actor.detached:
            self._maybe_retire(actor)
        return True

    # ---------------------------------------------------------------- running
    def start(self, actor: Actor, worker: Worker) -> None:
        """Run ``actor`` in ``worker``, a process started for it."""
        worker.to("actor")
        worker.actor = actor
        actor.worker = worker
        if actor.state != "pending":
            actor.to("pending")
        init = self.init_task(actor)
        if actor.restarts:  # (the actor's runtime context tells it was reconstructed)
            spec = init.spec
            extra = {**(spec[P.S_EXTRA] or {}), "restarts": actor.restarts}
            init.spec = (*spec[:P.S_EXTRA], extra, *spec[P.S_EXTRA + 1:])
        actor.inflight[init.id] = init
        init.worker = worker
        init.gpus = actor.gpus  # its process sees them (CUDA_VISIBLE_DEVICES); the actor holds them
        self.tasks.exec(worker, init)
        self.pump(actor)

    def init_task(self, actor: Actor) -> Task:
        """The actor's constructor call; on a restart a fresh bookkeeping record of it."""
        init = self.tasks.by_id.get(actor.spec[P.S_TASK_ID])
        if init is None:
            init = Task(actor.spec, self.notices.jobs.get(actor.job) or NULL_CLIENT)
            init.retries_left = 0
            self.tasks.by_id[init.id] = init
            self.tasks.pin(actor.spec)
        return init

    def host(self, actor: Actor, init: Task, index: int) -> None:
        """Run the actor on node ``index``: its constructor and then its calls go there, in
        order; this node keeps its record (handles, restarts, name)."""
        actor.remote = index
        if actor.state != "pending":
            actor.to("pending")
        init.ready = True
        extra = dict(actor.spec[P.S_EXTRA] or {})
        extra["max_restarts"] = actor.restarts_left
        extra["actor_name"] = extra.get("name")  # (its runtime context's)
        extra["name"] = None  # the name stays registered by this node
        extra["restarts"] = actor.restarts
        spec = actor.spec
        init.spec = (*spec[:P.S_EXTRA], extra, *spec[P.S_EXTRA + 1:])
        self.placement.charge(index, actor.spec[P.S_RESOURCES] or ())
        self.placement.forward(init, index)
        self.pump(actor)

    def init_done(self, actor: Actor, ok: bool, error: bytes | None) -> None:
        """``actor``'s constructor returned (``ok``) or raised (``error``)."""
        if ok:
            actor.to("alive")
            self.pump(actor)
        else:
            actor.init_error = error
            self.gone(actor, "its constructor raised")

    def pump(self, actor: Actor) -> None:
        """Send the calls at the head of ``actor``'s queue whose arguments are ready."""
        if actor.remote:
            self._pump_remote(actor)
            return
        if actor.state == "dead":
            err = self.dead_error(actor.id)
            while actor.queue:
                self.tasks.finish_error(actor.queue.popleft(), system_error_blob(err))
            return
        worker = actor.worker
        if worker is None or worker.client is None or actor.state not in ("alive", "pending"):
            return
        exec_ = self.tasks.exec
        for task in self._ready_calls(actor):
            task.worker = worker
            task.attempt += 1
            actor.inflight[task.id] = task
            exec_(worker, task)
        if actor.count <= 0 and not actor.detached:
            self._maybe_retire(actor)

    @staticmethod
    def _ready_calls(actor: Actor) -> list[Task]:
        """Take the calls of ``actor``'s queue that may run now: those at its head whose
        arguments are ready; for a concurrent (async or threaded) actor every ready call, so
        a call waiting for its arguments holds up no later one, as Ray runs such actors; for
        a plain one called by several callers, every ready call with no earlier call of its
        caller still waiting (Ray orders a plain actor's calls per caller only)."""
        queue = actor.queue
        ready: list[Task] = []
        while queue and queue[0].ready:
            task = queue.popleft()
            if not task.finished:
                ready.append(task)
        if actor.unordered and queue:
            waiting = [t for t in queue if not t.finished]
            ready += [t for t in waiting if t.ready]
            actor.queue = collections.deque(t for t in waiting if not t.ready)
        elif actor.caller is MANY_CALLERS and len(queue) > 1:
            held: set[object] = set()  # callers with a call still waiting for its arguments
            keep: list[Task] = []
            for task in queue:
                if task.finished:
                    continue
                caller = _caller(task)
                if task.ready and caller not in held:
                    ready.append(task)
                else:
                    held.add(caller)
                    keep.append(task)
            actor.queue = collections.deque(keep)
        return ready

    def _pump_remote(self, actor: Actor) -> None:
        for task in self._ready_calls(actor):
            self.placement.forward(task, actor.remote)
        if not actor.queue and actor.state == "remote":
            self.by_id.pop(actor.id, None)  # made again by the next call
        elif actor.count <= 0 and not actor.detached and actor.spec:
            self._maybe_retire(actor)

    def requeue(self, task: Task) -> None:
        """A call that must run again goes first in its actor's queue."""
        actor = self.by_id[task.spec[P.S_ACTOR]]
        actor.queue.appendleft(task)
        self.pump(actor)

    def cancel(self, task: Task, err: bytes) -> None:
        actor = self.by_id.get(task.spec[P.S_ACTOR])
        if actor is not None and task in actor.queue:
            actor.queue.remove(task)
            self.tasks.finish_error(task, err)
        elif actor is not None and actor.worker is not None and actor.worker.client:
            self.io.send(actor.worker.client, (P.INTERRUPT, task.id))

    # ---------------------------------------------------------------- restarts and death
    def worker_lost(self, actor: Actor, worker: Worker, how: str) -> None:
        """``actor``'s process here ended (``how``): restart it or let it die."""
        if actor.state == "dead":
            return
        actor.worker = None
        self.placement.release(actor.held, actor.gpus)
        actor.held = ()
        actor.gpus = []
        if actor.killed:
            self.gone(actor, self._killed_reason(actor))
            return
        if actor.restarts_left == 0 or actor.init_error is not None:
            self.gone(actor, f"its process (pid={worker.pid}) {how}")
            return
        self._restarting(actor)
        lost = [t for tid, t in actor.inflight.items() if tid != actor.spec[P.S_TASK_ID]]
        actor.inflight.clear()
        init = self.tasks.by_id.pop(actor.spec[P.S_TASK_ID], None)
        if init is not None:
            self.tasks.unpin(init)
        self.calls_lost_in_restart(actor, lost, f"its process pid={worker.pid} {how}")
        if actor.host_for:
            self.io.to_node(actor.host_for, (P.ACTOR_EVENT, actor.id, "restarted", how))
        else:
            self._announce_restart(actor)
        self.placement.queue_actor(actor)

    def _restarting(self, actor: Actor) -> None:
        if actor.restarts_left > 0:  # -1: no limit, as in Ray
            actor.restarts_left -= 1
        actor.restarts += 1
        actor.to("restarting")

    def _announce_restart(self, actor: Actor) -> None:
        self.notices.event(actor.job, ev.ActorRestarted, (actor.id, actor.restarts))

    def calls_lost_in_restart(self, actor: Actor, lost: list[Task], how: str) -> None:
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
                self.tasks.finish_error(task, system_error_blob(err))

    def hosted_event(self, index: int, actor_id: int, what: str, reason: str) -> None:
        """Node ``index``, which runs one of our actors, restarted its process or lost it."""
        actor = self.by_id.get(actor_id)
        if actor is None or actor.remote != index or not actor.spec:
            return
        if what == "restarted":
            if actor.restarts_left > 0:
                actor.restarts_left -= 1
            actor.restarts += 1
            self._announce_restart(actor)
        elif what == "dead":
            actor.remote = 0  # nothing left to stop there
            self.gone(actor, reason)

    def _maybe_retire(self, actor: Actor) -> None:
        if actor.state == "dead" or actor.queue or len(actor.inflight) > 0:
            return
        self.gone(actor, "all handles to it went out of scope", graceful=True)

    def kill(self, actor_id: int, no_restart: bool, why: str | None = None) -> None:
        """Stop ``actor_id`` (for good with ``no_restart``); ``why`` is what later calls are
        told (the actor's own ``exit_actor()``), else that it was killed."""
        actor = self.by_id.get(actor_id)
        owner = actor_id >> P.OWNER_SHIFT
        msg = (P.KILL_ACTOR, actor_id, no_restart) if why is None else (
            P.KILL_ACTOR, actor_id, no_restart, why)
        if (actor is None or actor.remote) and owner not in (0, self.node_index):
            self.io.to_node(owner, msg)
            return
        if actor is None or actor.state == "dead":
            return
        if no_restart:
            actor.killed = True
            actor.restarts_left = 0
            if why is not None:
                self.kill_reasons[actor_id] = why
        if actor.remote:  # runs on another node: that node stops (and maybe restarts) it
            self.io.to_node(actor.remote, msg)
            if no_restart:
                self.gone(actor, self._killed_reason(actor))
            return
        if actor.worker is not None:
            self.io.kill_worker(actor.worker)
        else:
            self.gone(actor, self._killed_reason(actor))

    def _killed_reason(self, actor: Actor) -> str:
        return self.kill_reasons.pop(actor.id, None) or "it was killed with kill()"

    def creator_left(self, client_no: int) -> None:
        """The worker that created actors is gone: its non-detached actors die with it."""
        for actor in list(self.by_id.values()):
            if actor.creator == client_no and not actor.detached:
                self.gone(actor, "the worker that created it (its owner) died")

    def driver_left(self, job: int) -> None:
        for actor in list(self.by_id.values()):
            if actor.job == job and not actor.detached:
                self.gone(actor, "its driver exited")

    def gone(self, actor: Actor, reason: str, graceful: bool = False) -> None:
        """``actor`` is dead for good (``reason``): its process stops, its calls fail."""
        if actor.state == "dead":
            return
        actor.to("dead")
        actor.restarts_left = 0
        worker = actor.worker
        actor.worker = None
        if worker is not None:
            self.placement.release(actor.held, actor.gpus)
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
        self._fail_calls(actor, system_error_blob(self.dead_error(actor.id, reason)))
        self.placement.drop_actor(actor)
        init = self.tasks.by_id.pop(actor.spec[P.S_TASK_ID], None) if actor.spec else None
        if init is not None:
            init.finished = True
            self.tasks.unpin(init)
        if actor.name:
            self.io.to_head("unregister_name", (actor.namespace, actor.name, actor.id))
        if actor.host_for:
            self.io.to_node(actor.host_for, (P.ACTOR_EVENT, actor.id, "dead", reason))
        else:
            self.notices.event(actor.job, ev.ActorDied, (actor.id, reason))
        self.dead_reasons[actor.id] = reason
        if actor.count <= 0:
            self.by_id.pop(actor.id, None)

    def _fail_calls(self, actor: Actor, blob: bytes) -> None:
        for task in list(actor.inflight.values()) + list(actor.queue):
            self.tasks.finish_error(task, blob)
        actor.inflight.clear()
        actor.queue.clear()

    def dead_error(self, actor_id: int, reason: str | None = None) -> ActorDiedError:
        reason = reason or self.dead_reasons.get(actor_id) or "it is no longer alive"
        return ActorDiedError(
            f"The actor {actor_id:x} cannot run the call: {reason}.", f"{actor_id:x}")

    # ---------------------------------------------------------------- other nodes
    def node_lost(self, index: int) -> dict[int, Actor]:
        """Node ``index`` is gone: our actors placed there restart (returned, to be placed
        anew once their lost calls are known) or die; stand-ins routing to it die."""
        restarting: dict[int, Actor] = {}
        for actor in [a for a in self.by_id.values() if a.remote == index and a.spec]:
            actor.remote = 0
            if actor.killed or actor.restarts_left == 0 or actor.state == "dead":
                self.gone(actor, f"its node ({index}) was lost")
                continue
            self._restarting(actor)
            restarting[actor.id] = actor
        for actor in [a for a in self.by_id.values() if a.remote == index]:
            actor.to("dead")
            self.dead_reasons[actor.id] = f"its node ({index}) was lost"
            del self.by_id[actor.id]
            dead_blob = system_error_blob(self.dead_error(actor.id))
            for task in list(actor.queue):
                self.tasks.finish_error(task, dead_blob)
            actor.queue.clear()
        return restarting

    def restart_elsewhere(self, actor: Actor, lost: list[Task], index: int) -> None:
        """Our actor's node ``index`` was lost: the calls it was running run again after the
        restart while ``max_task_retries`` allows, and the actor is placed anew."""
        self.calls_lost_in_restart(actor, lost, f"its node ({index}) was lost")
        self._announce_restart(actor)
        init = self.init_task(actor)
        init.remote = 0
        self.place(init)


def _caller(task: Task) -> object:
    """Who made the call ``task``, for a plain actor's order: the submitting process here (a
    driver or worker), or for a call forwarded by another node the task that made it."""
    owner = task.owner
    return task.spec[P.S_PARENT] if owner.kind == P.KIND_NODE else owner

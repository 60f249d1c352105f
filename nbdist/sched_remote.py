"""NodeState's other nodes (see `nbdist.scheduler`): the cluster view, forwarding tasks and
actors to nodes with the resources, fetching and borrowing their objects, and what a lost node
takes with it. Plain functions taking the state, bound as NodeState methods in its class body.
"""

from __future__ import annotations

import collections
import time
from typing import TYPE_CHECKING, Any

from . import protocol as P
from .exceptions import ActorDiedError, ObjectLostError
from .sched_records import PENDING, READY, Actor, Client, Task
from .serialization import system_error_blob

if TYPE_CHECKING:
    from .scheduler import NodeState


def set_cluster_view(self: NodeState, view: dict[int, dict[str, Any]]) -> None:
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


def _remote_for(self: NodeState, shape: tuple[tuple[str, float], ...], need_free: bool) -> int:
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


def _spill(self: NodeState, queue: collections.deque[Task], shape: tuple[tuple[str, float], ...]
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


def _forward(self: NodeState, task: Task, index: int) -> None:
    task.remote = index
    task.attempt += 1
    task.dispatched_at = time.time()
    # Count it against that node until its next report.
    if index in self.remote and not task.spec[P.S_ACTOR]:
        avail = self.remote[index]["available"]
        for name, amount in task.shape:
            avail[name] = avail.get(name, 0.0) - amount
    self.io.forward(index, task.spec, [self.loc(d) for d in task.spec[P.S_DEPS]])


def remote_started(self: NodeState, task_ids: list[int], t: float) -> None:
    by_owner: dict[Client, list[tuple[int, int]]] = {}
    for tid in task_ids:
        task = self.tasks.get(tid)
        if task is not None and not task.finished:
            by_owner.setdefault(task.owner, []).append((tid, 0))
    for owner, items in by_owner.items():
        self.io.send(owner, (P.STARTED, items, t))


def remote_result(self: NodeState, index: int, task_id: int, ok: bool, locs: list, t0: float,
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


def node_lost(self: NodeState, index: int) -> None:
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


def _restart_elsewhere(self: NodeState, actor: Actor, lost: list[Task], index: int) -> None:
    """Our actor's node ``index`` was lost: the calls it was running run again after the
    restart while ``max_task_retries`` allows, and the actor is placed anew."""
    self._calls_lost_in_restart(actor, lost, f"its node ({index}) was lost")
    self._event(actor.job, "actor_restarted", {"actor_id": actor.id,
                                               "restarts": actor.restarts})
    init = self._init_task(actor)
    init.remote = 0
    self._deps_ready(init)


def _fetch_if_foreign(self: NodeState, oid: int) -> None:
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


def value_arrived(self: NodeState, loc: tuple) -> None:
    """A copy of an object fetched from its owner node."""
    oid = loc[0]
    self.fetching.discard(oid)
    obj = self.objects.get(oid)
    if obj is None or obj.state == READY:
        if loc[2]:
            self.io.unlink(oid)
        return
    self._store(oid, obj, loc[:3], loc[3] if len(loc) > 3 else ())


def accept_forward(self: NodeState, peer: Client, spec: tuple, dep_locs: list) -> None:
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

"""Placement: where and when queued work runs, on this node or on another (layer L1).

Owns the node's resources (``total``, ``avail``, ``free_gpus``, ``shared_gpus``), the queues
of work that is ready to start (``ready``: resource shape -> FIFO of plain tasks whose
arguments are here; ``pending_actors``: actors waiting for a process or a node),
``need_dispatch`` (the daemon runs the node state's ``dispatch`` at the end of a loop turn when
set), the other nodes as the head last reported them (``remote``) and the tasks no node can run
yet (``parked``).

Invariants: ``avail`` is ``total`` minus what running tasks and live actors hold, except CPU
lent back by a worker blocked in `get` (so it may go below zero for a moment when that worker
unblocks). A task sits in at most one ready queue; queues skip finished (cancelled) tasks.

Forwarding ("spillback", not to be confused with spilling objects to disk): a task this node
cannot run at all (its shape exceeds ``total``) goes to a node that can; a queued task this
node cannot start now (no resources or workers free) goes to a node with room for it now.
A forwarded task is charged against that node's ``available`` until its next report, so a
burst spreads instead of piling on one node. Where nodes can join (``infeasible_wait`` > 0),
a task no node can run is parked until a node that can joins or the wait ends.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from typing import Any

from nbdist.scheduler.bundles import group_of
from nbdist.scheduler.records import Actor, NodeIO, Shape, Task
from nbdist.wire import protocol as P
from nbdist.wire.protocol import SOFT_NODE_PIN

EPS = 1e-9


def without_soft_pins(shape: Shape) -> Shape:
    """``shape`` without its soft node pins (the same object if it has none)."""
    if not any(a == SOFT_NODE_PIN and n.startswith("node:") for n, a in shape):
        return shape
    return tuple((n, a) for n, a in shape if not (a == SOFT_NODE_PIN and n.startswith("node:")))


class Placement:
    def __init__(self, io: NodeIO, node_index: int, resources: dict[str, float],
                 gpu_ids: list[int], loc: Callable[[int], tuple | None]) -> None:
        self.io = io
        self.node_index = node_index
        self.loc = loc
        self.total = dict(resources)
        self.avail = dict(resources)
        self.free_gpus = list(gpu_ids)  # GPUs nothing holds any part of
        # GPUs fractional requests (num_gpus < 1) share -> the part still free; such requests
        # pack onto the fullest one they fit in, as Ray's do
        self.shared_gpus: dict[int, float] = {}
        self.group_gpus: dict[str, list[int]] = {}  # "GPU_group_<pg>" -> its free ids (bundles)
        # placement groups removed (or found infeasible) recently -> why (see bundles.py)
        self.ended_groups: collections.OrderedDict[str, str] = collections.OrderedDict()
        self.ready: dict[Shape, collections.deque[Task]] = {}
        self.pending_actors: collections.deque[Actor] = collections.deque()
        self.need_dispatch = False
        self.remote: dict[int, dict[str, Any]] = {}  # index -> total, available, alive
        # Where nodes can join (a cluster started by `nbdist start`), a task no node can run
        # waits this long for one that can before it fails; parked: task id -> deadline.
        self.infeasible_wait = 0.0
        self.parked: dict[int, float] = {}

    # ---------------------------------------------------------------- this node's resources
    def fits(self, shape: Shape) -> bool:
        avail = self.avail
        for name, amount in shape:
            if avail.get(name, 0.0) < amount - EPS:
                return False
        return True

    def feasible(self, shape: Shape) -> bool:
        return all(self.total.get(n, 0.0) >= a - EPS for n, a in shape)

    def acquire(self, shape: Shape) -> list[int]:
        """Take ``shape`` from the free resources; the GPU ids it gets."""
        avail = self.avail
        gpus: list[int] = []
        for name, amount in shape:
            avail[name] = avail.get(name, 0.0) - amount
            if name == "GPU" and amount < 1 - EPS:
                gpus = self._share_gpu(amount)
            elif name == "GPU":
                n = int(amount + 0.999)
                gpus, self.free_gpus = self.free_gpus[:n], self.free_gpus[n:]
            elif name in self.group_gpus:
                n = int(amount + 0.999)
                pool = self.group_gpus[name]
                gpus, pool[:] = pool[:n], pool[n:]
        self.io.resources_changed()
        return gpus

    def release(self, shape: Shape, gpus: list[int]) -> None:
        avail = self.avail
        total = self.total
        pool = self.free_gpus
        share = 0.0
        for name, amount in shape:
            if "_group_" in name:
                if name not in total:
                    continue  # its placement group was removed meanwhile
                if name in self.group_gpus:
                    pool = self.group_gpus[name]
            elif name == "GPU" and amount < 1 - EPS:
                share = amount
            avail[name] = avail.get(name, 0.0) + amount
        if gpus and share and pool is self.free_gpus:
            self._unshare_gpu(gpus[0], share)
        elif gpus:
            pool.extend(gpus)
        self.io.resources_changed()

    def _share_gpu(self, amount: float) -> list[int]:
        """The GPU a fractional request gets: the fullest shared one it fits in, else a free
        one, which becomes shared."""
        fits = [(left, gid) for gid, left in self.shared_gpus.items() if left >= amount - EPS]
        if fits:
            gid = min(fits)[1]
        elif self.free_gpus:
            gid = self.free_gpus.pop(0)
            self.shared_gpus[gid] = 1.0
        else:
            return []
        self.shared_gpus[gid] -= amount
        return [gid]

    def _unshare_gpu(self, gid: int, amount: float) -> None:
        left = self.shared_gpus.get(gid, 0.0) + amount
        if left >= 1 - EPS:
            self.shared_gpus.pop(gid, None)
            self.free_gpus.append(gid)
        else:
            self.shared_gpus[gid] = left

    def lend_cpu(self, cpu: float) -> None:
        """A worker blocked in `get` gives back its task's CPU (negative: takes it again;
        that may oversubscribe for a moment: the task was already running)."""
        if cpu:
            self.avail["CPU"] = self.avail.get("CPU", 0.0) + cpu
            self.io.resources_changed()

    # ---------------------------------------------------------------- queues
    def enqueue(self, task: Task) -> None:
        queue = self.ready.get(task.shape)
        if queue is None:
            queue = self.ready[task.shape] = collections.deque()
        queue.append(task)
        self.need_dispatch = True

    def requeue(self, task: Task) -> None:
        """A task that ran and must run again goes first in its queue."""
        self.ready.setdefault(task.shape, collections.deque()).appendleft(task)
        self.need_dispatch = True

    def queue_actor(self, actor: Actor) -> None:
        self.pending_actors.append(actor)
        self.need_dispatch = True

    def drop_actor(self, actor: Actor) -> None:
        if actor in self.pending_actors:
            self.pending_actors.remove(actor)

    # ---------------------------------------------------------------- other nodes
    def set_cluster_view(self, view: dict[int, dict[str, Any]]) -> list[int]:
        """The other nodes as the head reports them; the parked tasks to try placing again.
        A node that died is handled by the node state's `node_lost`, not here."""
        self.remote = {i: dict(info) for i, info in view.items()
                       if i != self.node_index and info.get("alive")}
        if self.remote:
            self.need_dispatch = True
        return list(self.parked)

    def node_lost(self, index: int) -> None:
        self.remote.pop(index, None)

    def remote_for(self, shape: Shape, need_free: bool) -> int:
        """A node that can run ``shape`` (has it free now, with ``need_free``); 0 if none.
        Among those with it free, the one with the most free CPU."""
        best, best_cpu = 0, float("-inf")
        for index, info in self.remote.items():
            have = info["available"] if need_free else info["total"]
            if all(have.get(n, 0.0) >= a - EPS for n, a in shape):
                cpu = info["available"].get("CPU", 0.0)
                if cpu > best_cpu:
                    best, best_cpu = index, cpu
        return best

    def charge(self, index: int, shape: Shape) -> None:
        """Count ``shape`` against node ``index`` until its next report."""
        info = self.remote.get(index)
        if info is not None:
            avail = info["available"]
            for name, amount in shape:
                avail[name] = avail.get(name, 0.0) - amount

    def forward(self, task: Task, index: int) -> None:
        """Send ``task`` (with the locations of its arguments) to node ``index`` to run."""
        task.remote = index
        task.attempt += 1
        task.dispatched_at = time.time()
        if not task.spec[P.S_ACTOR]:
            self.charge(index, task.shape)
        loc = self.loc
        self.io.forward(index, task.spec, [loc(d) for d in task.spec[P.S_DEPS]])

    def spillback(self, queue: collections.deque[Task], shape: Shape) -> None:
        """Forward queued tasks this node cannot start now to nodes that have room for them."""
        while queue:
            task = queue[0]
            if task.finished:
                queue.popleft()
                continue
            if task.no_forward:
                return
            index = self.remote_for(shape, need_free=True)
            if not index:
                return
            queue.popleft()
            self.forward(task, index)

    # ---------------------------------------------------------------- waiting for a node
    def park(self, task: Task) -> bool:
        """Wait for a node that can run ``task`` to join, where nodes can; False if not.
        Work in a placement group waits (without a deadline) until the group is placed."""
        if task.no_forward:
            return False
        pg = group_of(task.placement_shape)
        if pg is not None:
            if pg in self.ended_groups:
                return False
            self.parked.setdefault(task.id, float("inf"))
            return True
        if any(n.startswith("node:") for n, _ in task.placement_shape):
            return False  # pinned to a node that is not in the cluster: it will not join
        if self.infeasible_wait > 0:
            self.parked.setdefault(task.id, time.monotonic() + self.infeasible_wait)
            return True
        return False

    def expired(self, now: float, tasks: dict[int, Task]) -> list[Task]:
        """The parked tasks whose wait ended; forgets those that ended meanwhile."""
        out = []
        for task_id, deadline in list(self.parked.items()):
            task = tasks.get(task_id)
            if task is None or task.finished:
                del self.parked[task_id]
            elif deadline <= now:
                del self.parked[task_id]
                out.append(task)
        return out

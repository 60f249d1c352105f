"""The task table: every task this node has accepted and not yet ended (layer L1).

Owns ``by_id`` (task id -> `Task`: waiting for arguments, queued, running here or forwarded to
another node) and ``fns`` (function bodies registered by drivers, sent to each worker once).

A task pins its arguments and the refs inside them (`pin`) from submission to its end
(`unpin`). It ends exactly once (``Task.finished``): `finish` with its results or
`finish_error` with an error stored in each of its return ids; either way the owner gets one
DONE, the started-notice still pending for it is dropped, and for a task another node
forwarded here the copies held for that node are let go. A task that raised may run again
(`may_retry`) as its ``retry_exceptions`` policy and ``max_retries`` allow.
"""

from __future__ import annotations

from collections.abc import Callable

from nbdist import events as ev
from nbdist.scheduler.lineage import LINEAGE
from nbdist.scheduler.notices import Notices
from nbdist.scheduler.objects import ObjectTable
from nbdist.scheduler.records import Client, NodeIO, Task, Worker, producer_of
from nbdist.wire import protocol as P
from nbdist.wire.serialization import error_fields, error_type_names


class TaskTable:
    def __init__(self, io: NodeIO, objects: ObjectTable, notices: Notices) -> None:
        self.io = io
        self.objects = objects
        self.notices = notices
        self.by_id: dict[int, Task] = {}
        self.fns: dict[int, bytes] = {}
        # Called when a task run to rebuild lost values ends (`nbdist.scheduler.lineage`),
        # with its error if it failed.
        self.rebuilt: Callable[[Task, bytes | None], None] = lambda task, error: None

    def __len__(self) -> int:
        return len(self.by_id)

    def producer(self, oid: int) -> Task | None:
        return producer_of(self.by_id, oid)

    def name_of(self, task_id: int) -> tuple[str, int]:
        task = self.by_id.get(task_id)
        if task is None:
            return "?", 0
        return task.spec[P.S_NAME], task.spec[P.S_JOB]

    def pin(self, spec: tuple) -> None:
        incref = self.objects.incref
        for dep in spec[P.S_DEPS]:
            incref(dep)
        for inner in spec[P.S_CONTAINED]:
            incref(inner)

    def unpin(self, task: Task) -> None:
        decref = self.objects.decref
        spec = task.spec
        for dep in spec[P.S_DEPS]:
            decref(dep)
        for inner in spec[P.S_CONTAINED]:
            decref(inner)

    def exec(self, worker: Worker, task: Task) -> None:
        """Send ``task`` to ``worker`` with its function (first time) and argument values."""
        client = worker.client
        assert client is not None
        spec = task.spec
        fid = spec[P.S_FID]
        if fid and fid not in worker.fns:
            data = self.fns.get(fid)
            if data is not None:
                self.io.send(client, (P.FN, fid, data))
                worker.fns.add(fid)
        loc = self.objects.loc
        deps = [loc(d) for d in spec[P.S_DEPS]]
        self.objects.lease(client, deps)
        self.io.send(client, (P.EXEC, spec, deps, task.gpus))
        self.notices.task_started(task.owner, task.id, spec, worker.pid)

    def finish(self, task: Task, locs: list, t0: float, t1: float, pid: int,
               where: str = "") -> None:
        """``where``: the id of the node it ran on, when not this one (forwarded)."""
        task.finished = True
        owner = task.owner
        self.notices.ended(owner, task.id)
        self.by_id.pop(task.id, None)
        self.objects.lease(owner, locs)
        self.io.send(owner, (P.DONE, task.id, True, locs, t0, t1, pid, *_where(where)))
        self.objects.store_results(owner, locs)
        if owner.kind == P.KIND_WORKER:
            self.notices.task_finished(task.spec[P.S_JOB], task.id, task.spec[P.S_NAME], locs,
                                       t0, t1, pid)
        self.unpin(task)
        if owner.kind == P.KIND_NODE:
            self._release_forwarded(owner, task)
        elif owner.kind == LINEAGE:
            self.rebuilt(task, None)

    def finish_error(self, task: Task, error: bytes, t0: float = 0.0, t1: float = 0.0,
                     pid: int = 0, where: str = "") -> None:
        if task.finished:
            return
        task.finished = True
        self.by_id.pop(task.id, None)
        owner = task.owner
        self.notices.ended(owner, task.id)
        locs = [(rid, error, 0) for rid in task.return_ids] if task.spec[P.S_NRET] else []
        self.io.send(owner, (P.DONE, task.id, False, locs, t0, t1, pid, *_where(where)))
        self.objects.store_results(owner, locs)
        if owner.kind == P.KIND_WORKER:
            etype, message, text = error_fields(error)
            self.notices.event(task.spec[P.S_JOB], ev.TaskFailed, (
                task.id, task.spec[P.S_NAME], etype, message, t1 - t0 if t0 else 0.0, pid, t0,
                text, None))
        self.unpin(task)
        if owner.kind == P.KIND_NODE:
            self._release_forwarded(owner, task)
        elif owner.kind == LINEAGE:
            self.rebuilt(task, error)

    def _release_forwarded(self, peer: Client, task: Task) -> None:
        """A task another node forwarded here ended and its results went back: drop the
        copies of its arguments and results held for that node."""
        self.objects.refs(peer, [(-1, oid) for oid in (*task.return_ids, *task.spec[P.S_DEPS])])

    def may_retry(self, task: Task, error: bytes) -> bool:
        """``task`` raised (``error``): whether it runs again (one retry used, announced)."""
        policy = task.spec[P.S_RETRY_EXC]
        if not policy or task.retries_left <= 0 or task.cancelled or error[:1] != b"E":
            return False
        if policy is not True:
            # The owner sent the allowed exception types by name; match them in the MRO.
            names = error_type_names(error)
            if not any(n in names for n in policy):
                return False
        self.retried(task, "the task raised and retry_exceptions allows a retry")
        return True

    def retried(self, task: Task, reason: str) -> None:
        task.retries_left -= 1
        self.notices.event(task.spec[P.S_JOB], ev.TaskRetried, (
            task.id, task.spec[P.S_NAME], task.attempt + 1, reason))


def _where(node_id: str) -> tuple[str, ...]:
    """The DONE message's optional last field: the node a forwarded task ran on."""
    return (node_id,) if node_id else ()

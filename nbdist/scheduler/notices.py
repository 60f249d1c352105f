"""Event records and batched notices to the drivers (layer L1).

Owns ``jobs`` (driver client per job number), the task-started notices (to a task's owner,
and for a task a task submitted, a record to its driver) and the object records (freed,
spilled, restored) waiting for the next flush. The daemon flushes at most every
``node.NOTICE_S``; a task that ends before then needs no started-notice at all (its DONE says
it), so ending a task removes its entry. An event for a job whose driver is on another node is
relayed to that node.

Records travel in the compact form of `nbdist.events` (``(record code, fields)``, ids as
ints): an EVENT message is ``(EVENT, [record, ...])``, and the driver publishes them as they
are. ``node_id`` is set by the daemon (`node.py`) as it starts.
"""

from __future__ import annotations

import time

from nbdist import events as ev
from nbdist.scheduler.records import Client, NodeIO
from nbdist.wire import protocol as P


class Notices:
    def __init__(self, io: NodeIO, node_index: int) -> None:
        self.io = io
        self.node_index = node_index
        self.node_id = ""
        self.jobs: dict[int, Client] = {}
        self.started: dict[Client, dict[int, int]] = {}  # owner -> task id -> worker pid
        self.batched: dict[int, list[ev.Compact]] = {}  # job -> object records
        # A nested task's owner is a worker: its driver hears that it started (for the
        # state API and the panel) from here. task id -> (job, name, worker pid)
        self.nested: dict[int, tuple[int, str, int]] = {}

    def send(self, job: int, items: list[ev.Compact]) -> None:
        """Records for the driver of ``job``, now."""
        client = self.jobs.get(job)
        if client is not None:
            self.io.send(client, (P.EVENT, items))
        elif job >> 20 not in (0, self.node_index):
            self.io.to_node(job >> 20, (P.RELAY, job, (P.EVENT, items)))

    def event(self, job: int, cls: type[ev.Event], values: tuple) -> None:
        """A record ``cls(time.time(), *values)`` for the driver of ``job`` (ids as ints)."""
        self.send(job, [(cls.code, (time.time(), *values))])

    def everyone(self, cls: type[ev.Event], values: tuple) -> None:
        """A record ``cls(time.time(), *values)`` for every driver here."""
        item = [(cls.code, (time.time(), *values))]
        for job in list(self.jobs):
            self.send(job, item)

    def later(self, job: int, cls: type[ev.Event], values: tuple) -> None:
        """A record ``cls(time.time(), *values)`` for the driver of ``job`` at the next
        flush (objects freed, spilled, restored: many at a time, one message)."""
        self.batched.setdefault(job, []).append((cls.code, (time.time(), *values)))

    def task_finished(self, job: int, task_id: int, name: str, locs: list, t0: float,
                      t1: float, pid: int) -> None:
        """A nested task ended well: its record, and one per value it returned (held by the
        task that submitted it)."""
        now = time.time()
        node = self.node_id
        self.send(job, [
            (ev.TaskFinished.code, (now, task_id, name, t1 - t0, node, pid, t0)),
            *((ev.ObjectCreated.code, (now, loc[0], len(loc[1]) if loc[1] else loc[2], node,
                                       task_id, task_id, loc[1] is None)) for loc in locs)])

    def freed(self, job: int, oid: int, size: int) -> None:
        self.later(job, ev.ObjectFreed, (oid, size, self.node_id))

    def task_started(self, owner: Client, task_id: int, spec: tuple, pid: int) -> None:
        """``task_id`` went to worker ``pid``: its owner hears so at the next flush, and so
        does its job's driver when the owner is a task."""
        self.started.setdefault(owner, {})[task_id] = pid
        if owner.kind == P.KIND_WORKER:
            self.nested[task_id] = (spec[P.S_JOB], spec[P.S_NAME], pid)

    def ended(self, owner: Client, task_id: int) -> None:
        pending = self.started.get(owner)
        if pending:
            pending.pop(task_id, None)
        if self.nested:
            self.nested.pop(task_id, None)

    def pending(self) -> bool:
        return bool(self.started or self.batched or self.nested)

    def flush(self) -> None:
        """Send the batched STARTED notices and object records."""
        if self.started:
            now = time.time()
            for owner, items in self.started.items():
                if items:
                    self.io.send(owner, (P.STARTED, list(items.items()), now))
            self.started = {}
        if self.nested:
            now = time.time()
            nested, self.nested = self.nested, {}
            for tid, (job, name, pid) in nested.items():
                self.batched.setdefault(job, []).append(
                    (ev.TaskStarted.code, (now, tid, name, self.node_id, pid)))
        if self.batched:
            batched, self.batched = self.batched, {}
            for job, records in batched.items():
                self.send(job, records)



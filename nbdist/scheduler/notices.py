"""Events and batched notices to the drivers (layer L1).

Owns ``jobs`` (driver client per job number), the task-started notices and the freed-object
notices waiting for the next flush. The daemon flushes at most every ``node.NOTICE_S``; a task
that ends before then needs no started-notice at all (its DONE says it), so ending a task
removes its entry. An event for a job whose driver is on another node is relayed to that node.
"""

from __future__ import annotations

import time

from .. import protocol as P
from .records import Client, NodeIO


class Notices:
    def __init__(self, io: NodeIO, node_index: int) -> None:
        self.io = io
        self.node_index = node_index
        self.jobs: dict[int, Client] = {}
        self.started: dict[Client, dict[int, int]] = {}  # owner -> task id -> worker pid
        self.freed: dict[int, list[int]] = {}  # job -> object ids

    def event(self, job: int, kind: str, fields: dict) -> None:
        client = self.jobs.get(job)
        if client is not None:
            self.io.send(client, (P.EVENT, kind, fields))
        elif job >> 20 not in (0, self.node_index):
            self.io.to_node(job >> 20, (P.RELAY, job, (P.EVENT, kind, fields)))

    def ended(self, owner: Client, task_id: int) -> None:
        pending = self.started.get(owner)
        if pending:
            pending.pop(task_id, None)

    def pending(self) -> bool:
        return bool(self.started or self.freed)

    def flush(self) -> None:
        """Send the batched STARTED and freed notices."""
        if self.started:
            now = time.time()
            for owner, items in self.started.items():
                if items:
                    self.io.send(owner, (P.STARTED, list(items.items()), now))
            self.started = {}
        if self.freed:
            for job, ids in self.freed.items():
                self.event(job, "objects_freed", {"ids": ids})
            self.freed = {}

"""The panel model's records: one small class per thing the panel shows (a task, a group of
tasks, an object, a wait, a worker, a node), each turning itself into the JSON record of the comm
schema (``docs/comm-protocol.md``), and ``Dirty``, the ids that changed since the last delta.

Owned by `model.Model` (which holds the only references and the lock around them); the
constants here are the schema's states and the limits that bound a message's size.
"""

from __future__ import annotations

import collections
from typing import Any, overload

from nbdist import events as ev
from nbdist.jupyter import schema

SCHEMA_VERSION = schema.SCHEMA_VERSION

# Once grouped, these records are not followed: the engine's TaskSummary says it all.
HOT_KINDS = frozenset(("task_submitted", "task_started", "task_finished", "task_retried",
                       "object_created", "object_freed", "object_pinned", "object_spilled",
                       "object_restored"))
# Failed tasks kept individually once grouped carry output lines of tasks this recent.
RECENT_OUTPUT_TASKS = 1_000

PENDING, SCHEDULED, RUNNING = "pending", "scheduled", "running"
FINISHED, FAILED = "finished", "failed"
# pending: waiting for its arguments; scheduled: its arguments are ready, it waits for a worker.
STATES = (PENDING, SCHEDULED, RUNNING, FINISHED, FAILED)
TERMINAL = frozenset((FINISHED, FAILED))

MAX_LINE_CHARS = 500
MAX_ERROR_CHARS = 8_000  # a failed task's message and remote traceback
GROUPED_OUTPUT_LINES = 3  # of a failed task kept individually in grouped mode
WORKER_SPANS = 20  # last tasks per worker sent for the panel's timeline (grouped or not)

Json = dict[str, Any]


@overload
def ms(value: float) -> float: ...
@overload
def ms(value: float | None) -> float | None: ...
def ms(value: float | None) -> float | None:
    # Milliseconds are all a timeline needs; fewer digits make smaller messages.
    return None if value is None else round(value, 3)


class TaskRecord:
    __slots__ = ("id", "name", "state", "deps", "dep_tasks", "returns", "parent", "actor",
                 "submitter", "group", "node", "worker", "submitted", "started", "ended",
                 "error_type", "error", "attempt", "stdout", "missing", "held", "paused",
                 "library_call")

    def __init__(self, e: ev.TaskSubmitted, group: str, dep_tasks: tuple[str, ...],
                 missing: int) -> None:
        self.id, self.name, self.state = e.task_id, e.name, PENDING
        self.deps, self.dep_tasks, self.returns = e.deps, dep_tasks, e.returns
        self.parent, self.actor, self.submitter = e.parent_task, e.actor_id, e.submitter
        self.group = group
        self.node: str | None = None
        self.worker: int | None = None
        self.submitted = e.time
        self.started: float | None = None
        self.ended: float | None = None
        self.error_type: str | None = None
        self.error: str | None = None
        self.attempt = 0
        self.stdout: collections.deque[str] | None = None  # made by its first line
        self.missing = missing  # arguments not ready yet
        self.held = False  # held by step-through mode (TaskHeld) until it starts or ends
        self.paused: str | None = None  # where it stopped in the debugger (TaskPaused)
        self.library_call = library_json(e.library_call)

    def to_json(self, max_lines: int | None = None) -> schema.Task:
        lines = list(self.stdout) if self.stdout is not None else []
        if max_lines is not None:
            lines = lines[-max_lines:]
        out: schema.Task = {
            "id": self.id, "name": self.name, "state": self.state, "deps": list(self.deps),
            "dep_tasks": list(self.dep_tasks), "returns": list(self.returns),
            "parent": self.parent,
            "actor": self.actor, "submitter": self.submitter, "group": self.group,
            "node": self.node, "worker": self.worker, "submitted": ms(self.submitted),
            "started": ms(self.started), "ended": ms(self.ended),
            "error_type": self.error_type, "error": self.error, "attempt": self.attempt,
            "stdout": lines, "held": self.held}
        if self.paused is not None:
            out["paused"] = self.paused
        if self.library_call is not None:
            out["library_call"] = self.library_call
        return out


def library_json(mark: tuple[str, str, str, str] | None) -> schema.LibraryCall | None:
    """A record's library mark (`nbdist.events.marks`) as the schema sends it."""
    if mark is None:
        return None
    library, run, member, role = mark
    return {"library": library, "run": run, "member": member, "role": role}


class GroupRecord:
    __slots__ = ("id", "name", "submitter", "counts", "library_call")

    def __init__(self, gid: str, name: str, submitter: str | None) -> None:
        self.id, self.name, self.submitter = gid, name, submitter
        self.counts = dict.fromkeys(STATES, 0)
        # A library's calls (as its first task's, or the engine's summary says)
        self.library_call: schema.LibraryCall | None = None

    def to_json(self) -> schema.Group:
        out: schema.Group = {"id": self.id, "name": self.name, "submitter": self.submitter,
                             "counts": dict(self.counts), "total": sum(self.counts.values())}
        if self.library_call is not None:
            out["library_call"] = self.library_call
        return out


class ObjectRecord:
    __slots__ = ("id", "size", "node", "owner", "task", "shm", "created", "refs", "uses",
                 "spilled", "held")

    def __init__(self, e: ev.ObjectCreated) -> None:
        self.id, self.size, self.node, self.owner = e.object_id, e.size, e.node_id, e.owner
        self.task, self.shm, self.created = e.task_id, e.in_shared_memory, e.time
        self.refs: int | None = None  # refs the driver holds (None: not known)
        self.uses = 0  # unfinished tasks taking it as an argument: it is pinned while > 0
        self.spilled = False  # on its node's disk (ObjectSpilled until ObjectRestored)
        self.held = False  # pinned in memory by its node (ObjectPinned)

    def to_json(self) -> schema.StoredObject:
        return {"id": self.id, "size": self.size, "node": self.node, "locations": [self.node],
                "owner": self.owner, "task": self.task, "in_shared_memory": self.shm,
                "state": "spilled" if self.spilled else "live", "created": ms(self.created),
                "refs": self.refs, "pinned": self.uses > 0 or self.held, "spilled": self.spilled}


class WaitRecord:
    __slots__ = ("id", "call", "num_returns", "total", "ready", "submitter", "pending",
                 "missing", "started", "ended", "done", "timed_out", "library_call")

    def __init__(self, e: ev.WaitBegun, pending: collections.Counter[str] | None) -> None:
        """``pending``: the ids not ready yet, with how often each is waited for; None once
        grouped, when objects are not followed and only the engine's count says how far."""
        self.id, self.call, self.num_returns = str(e.wait_id), e.call, e.num_returns
        self.total, self.submitter = len(e.object_ids), e.submitter
        self.pending = pending if pending is not None else collections.Counter()
        self.missing = sum(self.pending.values())
        self.ready = e.ready if pending is None else max(e.ready, self.total - self.missing)
        self.started = e.time
        self.ended: float | None = None
        self.done = self.timed_out = False
        self.library_call = library_json(e.library_call)

    def to_json(self) -> schema.Wait:
        out: schema.Wait = {
            "id": self.id, "call": self.call, "num_returns": self.num_returns,
            "total": self.total, "ready": self.ready, "submitter": self.submitter,
            "done": self.done, "timed_out": self.timed_out, "started": ms(self.started),
            "ended": ms(self.ended)}
        if self.library_call is not None:
            out["library_call"] = self.library_call
        return out


class WorkerRecord:
    __slots__ = ("key", "node", "pid", "state", "task", "task_name", "tasks_done", "busy",
                 "spans")

    def __init__(self, key: str, node: str, pid: int) -> None:
        self.key, self.node, self.pid, self.state = key, node, pid, "up"
        self.task: str | None = None
        self.task_name: str | None = None
        self.tasks_done, self.busy = 0, 0.0
        # [task id, name, started, ended, failed] of the last tasks it ran, oldest first
        self.spans: collections.deque[list[Any]] = collections.deque(maxlen=WORKER_SPANS)

    def to_json(self) -> schema.Worker:
        return {"id": self.key, "node": self.node, "pid": self.pid, "state": self.state,
                "task": self.task, "task_name": self.task_name, "tasks_done": self.tasks_done,
                "busy_s": round(self.busy, 3), "spans": list(self.spans)}


class NodeRecord:
    __slots__ = ("id", "state", "address", "resources", "workers", "running", "objects",
                 "bytes", "shm_bytes")

    def __init__(self, node_id: str) -> None:
        self.id, self.state = node_id, "up"
        self.address: str | None = None
        self.resources: dict[str, float] = {}
        self.workers = self.running = self.objects = self.bytes = self.shm_bytes = 0

    def to_json(self) -> schema.ClusterNode:
        capacity = self.resources.get("CPU") or self.workers or 1
        return {"id": self.id, "state": self.state, "address": self.address,
                "resources": self.resources, "workers": self.workers, "running": self.running,
                "capacity": capacity, "utilization": round(min(1.0, self.running / capacity), 3),
                "objects": self.objects, "bytes": self.bytes, "shm_bytes": self.shm_bytes}


class Dirty:
    """Ids whose full record goes into the next delta, and ids removed since the last one."""

    __slots__ = ("tasks", "tasks_removed", "groups", "edges", "objects", "objects_removed",
                 "waits", "waits_removed", "workers", "nodes", "actors", "totals", "step")

    def __init__(self) -> None:
        self.tasks: set[str] = set()
        self.tasks_removed: set[str] = set()
        self.groups: set[str] = set()
        self.edges: set[tuple[str, str]] = set()
        self.objects: set[str] = set()
        self.objects_removed: set[str] = set()
        self.waits: set[str] = set()
        self.waits_removed: set[str] = set()
        self.workers: set[str] = set()
        self.nodes: set[str] = set()
        self.actors: set[str] = set()
        self.totals = False  # counters that no record above reflects (output, drops)
        self.step = False  # the step-through mode or its held count changed

    def any(self) -> bool:
        return any(getattr(self, name) for name in self.__slots__)

"""The event records: the vocabulary of `nbdist.events` (layer L0: stdlib only).

Each record is a frozen dataclass registered with `_record`, which gives its class a ``code``
(its place in `RECORDS`) and names the fields that hold ids. That makes the *compact form*,
``(code, fields)`` with ids as ints, which a node sends its driver and the event bus keeps for
records nobody has read yet: `build` turns it into the record, `fields` turns any item (compact
or built) into ``(class, fields with ids as ints)``. No table per kind is involved: adding a
record class is adding a dataclass here. Read through `nbdist.events`, which re-exports all.
"""

from __future__ import annotations

import dataclasses
import operator
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from nbdist.ids import hex_id

# 2: TaskFailed.submitter; the TaskSummary kind. 3: ObjectPinned, ObjectSpilled,
# ObjectRestored; ObjectFreed.size and .node_id; every record class has a wire ``code``.
# 4: RunUpdate (the progress of a library run: a Tune search, a Train run).
# 5: TaskHeld, StepMode (step-through mode).
# 6: TaskSubmitted.library_call and WaitBegun.library_call (a library's own call or wait:
#    `nbdist.events.marks`); TaskSummary.marks.
# 7: RunUpdate.task_id and .actor_id (a run record published in a task or an actor's process).
EVENT_VERSION = 7


@dataclass(frozen=True, slots=True)
class Event:
    time: float

    kind = "event"
    version = EVENT_VERSION
    code = -1  # its number in `RECORDS`: the compact form names the class by it
    id_fields: ClassVar[tuple[str, ...]] = ()  # fields holding ids, or tuples of ids


# Every record class that travels compact, by `Event.code`: a node and its driver run the
# same nbdist (the connection handshake checks the protocol version), so the numbers agree.
RECORDS: list[type[Event]] = []
_id_positions: dict[type[Event], tuple[int, ...]] = {}
_getters: dict[type[Event], Callable[[Event], tuple]] = {}
_makers: list[Callable[[tuple], Event]] = []  # by code: a record from its compact fields


def _hex(value: Any) -> Any:
    kind = type(value)
    if kind is int:
        return hex_id(value)
    if kind is tuple or kind is list or kind is range:
        return tuple(hex_id(v) if type(v) is int else v for v in value)
    return value  # None, or formatted already


def _int(value: Any) -> Any:
    kind = type(value)
    if kind is str:
        try:
            return int(value, 16)
        except ValueError:
            return value  # not one of nbdist's ids (a hand-made record): kept as it is
    if kind is tuple or kind is list:
        return tuple(_int(v) for v in value)
    return value  # None, an int already, or a range of ints


def _maker(cls: type[Event], n: int, positions: tuple[int, ...]) -> Callable[[tuple], Event]:
    """A function making a ``cls`` record from its compact fields, its ids formatted inline.
    Generated once per class (as dataclasses generate ``__init__``): a record is made for
    every read of the stream, and a loop over the id positions cost a fifth more."""
    args = ", ".join(f"(f'{{v[{i}]:018x}}' if type(v[{i}]) is int else _hex(v[{i}]))"
                     if i in positions else f"v[{i}]" for i in range(n))
    namespace: dict[str, Any] = {"cls": cls, "_hex": _hex, "_short": _build_short}
    exec(f"def make(v):\n    if len(v) != {n}:\n        return _short(cls, v)\n"
         f"    return cls({args})\n", namespace)
    return namespace["make"]


def _build_short(cls: type[Event], values: tuple) -> Event:
    """A record from compact fields that leave out trailing defaults."""
    out = list(values)
    for i in _id_positions[cls]:
        if i < len(out):
            out[i] = _hex(out[i])
    return cls(*out)


def _record(*id_fields: str) -> Callable[[type[Any]], type[Any]]:
    """Register a record class: its `code`, and which of its fields hold ids."""

    def mark(cls: type[Any]) -> type[Any]:
        names = [f.name for f in dataclasses.fields(cls)]
        cls.code = len(RECORDS)
        cls.id_fields = id_fields
        RECORDS.append(cls)
        _id_positions[cls] = tuple(names.index(n) for n in id_fields)
        getter = operator.attrgetter(*names)
        _getters[cls] = getter if len(names) > 1 else (lambda e: (getter(e),))
        _makers.append(_maker(cls, len(names), _id_positions[cls]))
        return cls

    return mark


@_record("task_id", "deps", "returns", "parent_task", "actor_id")
@dataclass(frozen=True, slots=True)
class TaskSubmitted(Event):
    task_id: str
    name: str
    deps: tuple[str, ...]
    returns: tuple[str, ...]
    parent_task: str | None
    actor_id: str | None = None
    submitter: str | None = None  # an opaque tag of the caller (e.g. a notebook cell)
    # (library, run, member, role) when one of nbdist's libraries made the call (a
    # `marks.LibraryCall`); None for the user's own calls
    library_call: tuple[str, str, str, str] | None = None
    kind = "task_submitted"


@_record("task_id")
@dataclass(frozen=True, slots=True)
class TaskStarted(Event):
    task_id: str
    name: str
    node_id: str
    worker_pid: int
    kind = "task_started"


@_record("task_id")
@dataclass(frozen=True, slots=True)
class TaskFinished(Event):
    task_id: str
    name: str
    duration: float
    node_id: str
    worker_pid: int
    started: float = 0.0  # when the worker began it (time.time() on the worker's machine)
    kind = "task_finished"


@_record("task_id")
@dataclass(frozen=True, slots=True)
class TaskFailed(Event):
    task_id: str
    name: str
    error_type: str
    message: str
    duration: float
    worker_pid: int
    started: float = 0.0  # when the worker began it, if it ran (0.0 if it never did)
    traceback: str = ""  # the remote traceback, as the worker formatted it
    submitter: str | None = None  # as on its TaskSubmitted
    kind = "task_failed"


@_record("task_id")
@dataclass(frozen=True, slots=True)
class TaskRetried(Event):
    task_id: str
    name: str
    attempt: int
    reason: str
    kind = "task_retried"


@_record("object_id", "owner", "task_id")
@dataclass(frozen=True, slots=True)
class ObjectCreated(Event):
    object_id: str
    size: int
    node_id: str
    owner: str
    task_id: str | None
    in_shared_memory: bool
    kind = "object_created"


@_record("object_id")
@dataclass(frozen=True, slots=True)
class ObjectFreed(Event):
    object_id: str
    size: int = 0  # bytes (0: not known, e.g. a value only the driver held)
    node_id: str = ""  # the node that stored it ("": only the driver held it)
    kind = "object_freed"


@_record("object_id")
@dataclass(frozen=True, slots=True)
class ObjectPinned(Event):
    """An object held in shared memory for its readers (``pinned``) or let go (not): while
    pinned it is neither evicted nor spilled."""
    object_id: str
    size: int
    node_id: str
    pinned: bool = True
    kind = "object_pinned"


@_record("object_id")
@dataclass(frozen=True, slots=True)
class ObjectSpilled(Event):
    """The node wrote the object to its local disk and freed its shared memory."""
    object_id: str
    size: int
    node_id: str
    kind = "object_spilled"


@_record("object_id")
@dataclass(frozen=True, slots=True)
class ObjectRestored(Event):
    """A spilled object read back into shared memory (a reader needed it)."""
    object_id: str
    size: int
    node_id: str
    kind = "object_restored"


@_record("object_ids")
@dataclass(frozen=True, slots=True)
class WaitBegun(Event):
    wait_id: int
    call: str  # "get" or "wait"
    object_ids: tuple[str, ...]
    num_returns: int
    ready: int
    submitter: str | None = None
    # set when one of nbdist's libraries waits (`marks.LibraryCall` fields), as on TaskSubmitted
    library_call: tuple[str, str, str, str] | None = None
    kind = "wait_begun"


@_record()
@dataclass(frozen=True, slots=True)
class WaitProgress(Event):
    wait_id: int
    ready: int
    total: int
    kind = "wait_progress"


@_record()
@dataclass(frozen=True, slots=True)
class WaitDone(Event):
    wait_id: int
    ready: int
    total: int
    timed_out: bool
    kind = "wait_done"


@_record("actor_id")
@dataclass(frozen=True, slots=True)
class ActorCreated(Event):
    actor_id: str
    class_name: str
    name: str | None
    kind = "actor_created"


@_record("actor_id")
@dataclass(frozen=True, slots=True)
class ActorRestarted(Event):
    actor_id: str
    restarts: int
    kind = "actor_restarted"


@_record("actor_id")
@dataclass(frozen=True, slots=True)
class ActorDied(Event):
    actor_id: str
    reason: str
    kind = "actor_died"


@_record()
@dataclass(frozen=True, slots=True)
class NodeUp(Event):
    node_id: str
    address: str
    resources: dict[str, float] = field(default_factory=dict)
    kind = "node_up"


@_record()
@dataclass(frozen=True, slots=True)
class NodeDown(Event):
    node_id: str
    reason: str
    kind = "node_down"


@_record()
@dataclass(frozen=True, slots=True)
class WorkerUp(Event):
    node_id: str
    worker_pid: int
    kind = "worker_up"


@_record()
@dataclass(frozen=True, slots=True)
class WorkerDown(Event):
    node_id: str
    worker_pid: int
    reason: str
    kind = "worker_down"


@_record("task_id")
@dataclass(frozen=True, slots=True)
class Output(Event):
    task_id: str
    name: str
    worker_pid: int
    stream: str  # "stdout" or "stderr"
    line: str
    submitter: str | None = None  # the tag of the code that submitted the (root) task
    kind = "stdout"


@_record()
@dataclass(frozen=True, slots=True)
class EventsDropped(Event):
    count: int
    kind = "events_dropped"


@_record("task_id", "actor_id")
@dataclass(frozen=True, slots=True)
class RunUpdate(Event):
    """A row of a library run's progress: a trial of a Tune search, a worker of a Train run.

    Published by the library (``nbdist.tune``, ``nbdist.train``, ``nbdist.data``), one record per
    report or change of status; views fold them by ``(run, member)``. ``metrics`` holds the
    numbers of the member's last report, ``config`` its flat configuration (values as short
    strings), ``note`` what just happened to it where that is news (stopped by a scheduler, a
    checkpoint saved, a restart)."""
    library: str  # "tune" or "train"
    run: str  # the experiment or run name, unique in the driver
    member: str  # a trial id, or "rank N"
    status: str  # PENDING RUNNING PAUSED TERMINATED ERROR (Tune's names), RESTARTING
    iteration: int  # reports so far
    metrics: tuple[tuple[str, float], ...] = ()
    config: tuple[tuple[str, str], ...] = ()
    note: str = ""
    # The task (or actor call) and the actor whose process published it, when not the
    # driver: a dataset executed inside a task, an actor or a Train worker (the worker relays
    # its run records to the job's driver).
    task_id: str | None = None
    actor_id: str | None = None
    kind = "run_update"


@_record("task_id")
@dataclass(frozen=True, slots=True)
class TaskHeld(Event):
    """In step-through mode, a task whose arguments are ready is held by its node instead of
    being dispatched, until a step releases it (then its usual records follow)."""
    task_id: str
    name: str
    kind = "task_held"


@_record("released")
@dataclass(frozen=True, slots=True)
class StepMode(Event):
    """The driver's step-through mode after a command: on or off, how many of its tasks are
    still held, and which ones this command released."""
    on: bool
    held: int
    released: tuple[str, ...] = ()
    kind = "step_mode"


@_record("task_id")
@dataclass(frozen=True, slots=True)
class TaskPaused(Event):
    """A running task stopped in the debugger (``breakpoint()``, or a live post-mortem):
    ``paused`` True with where it stopped; False once it goes on (``how``: "continue" or
    "quit"). It keeps its worker and resources meanwhile."""
    task_id: str
    name: str
    worker_pid: int
    node_id: str
    where: str
    paused: bool = True
    how: str = ""
    kind = "task_paused"


# One group of `TaskSummary.groups`: (function name, submitter, pending, scheduled, running,
# finished, failed); pending: waiting for its arguments; scheduled: for a worker.
GroupCounts = tuple[str, "str | None", int, int, int, int, int]
# One of `TaskSummary.workers`: (node id, pid, id and name of the task it runs or None, tasks
# it ended, seconds busy, its last ended tasks as (task id, name, started, ended, failed)).
WorkerSummary = tuple[str, int, "str | None", "str | None", int, float,
                      tuple[tuple[str, str, float, float, bool], ...]]


@dataclass(frozen=True, slots=True)
class TaskSummary(Event):
    """The driver's tasks (nested ones included) folded by function and submitter, with the
    workers and nodes they ran on: what `summary()` returns. Not published."""
    groups: tuple[GroupCounts, ...]  # in order of appearance
    edges: tuple[tuple[int, int, int], ...]  # (producing group, consuming group, refs passed)
    workers: tuple[WorkerSummary, ...]
    # (node id, tasks running, live objects, their bytes, of which in shared memory)
    nodes: tuple[tuple[str, int, int, int, int], ...]
    objects_freed: int
    # The records folded in since the previous summary were all published after this (0.0:
    # none): how long the oldest news it carries had waited.
    news_since: float = 0.0
    # (group index, `marks.LibraryCall` fields) of the groups of a library's own calls
    marks: tuple[tuple[int, tuple[str, str, str, str]], ...] = ()
    kind = "task_summary"


# A record published compact is kept as ``(class code, fields)``: the record's fields in order,
# ids as ints (formatted only when built), plain values only, so the garbage collector stops
# scanning it after one look; a history of 200,000 objects cost the driver's full collections
# hundreds of milliseconds each. It is also the form a node sends its driver (`EVENT`).
Compact = tuple[int, tuple]


def build(item: Any) -> Event:
    """The record of an item as published (a raw subscriber's): built already, or built now
    from its compact form (a new object on every call)."""
    if type(item) is tuple:
        return _makers[item[0]](item[1])
    return item


def fields(item: Any) -> tuple[type[Event], tuple]:
    """``(record class, fields)`` of an item as published, however it was published: the
    record's fields in order (trailing defaults may be left out), every id as an int (an id
    that is not hex, in a hand-made record, stays a string). What a fold that keys its tables
    by id reads: no record is built for it."""
    if type(item) is tuple:
        return RECORDS[item[0]], item[1]
    cls = type(item)
    values = _getters[cls](item)
    positions = _id_positions[cls]
    if positions:
        out = list(values)
        for i in positions:
            out[i] = _int(out[i])
        values = tuple(out)
    return cls, values


def compact(cls: type[Event], values: tuple) -> Compact:
    """An item in compact form (what `EventBus.publish_later` keeps, and a node sends)."""
    return cls.code, values


def kind_of(item: Any) -> str:
    """The kind of an item as published, compact or built."""
    if type(item) is tuple:
        return RECORDS[item[0]].kind
    return item.kind


# ---------------------------------------------------------------- what the timeline answers
# (`events.executions`, `events.workers`; folded by `nbdist.events.tracing`)
FINISHED, FAILED, RETRIED, RUNNING = "finished", "failed", "retried", "running"


@dataclass(slots=True)
class Execution:
    """One run of a task on a worker (``end`` is None while it runs)."""

    task_id: str
    name: str
    node_id: str
    worker_pid: int
    start: float
    end: float | None = None
    state: str = RUNNING
    attempt: int = 0
    error_type: str | None = None
    error: str | None = None

    @property
    def duration(self) -> float:
        return max(0.0, (self.end if self.end is not None else time.time()) - self.start)


@dataclass(slots=True)
class WorkerState:
    """A worker as the event stream shows it: up/down, and the task it runs now (if any)."""

    node_id: str
    pid: int
    state: str = "up"
    task_id: str | None = None
    task_name: str | None = None
    tasks_done: int = 0

    @property
    def busy(self) -> bool:
        return self.task_id is not None

"""The ``nbdist`` comm schema as types: the Python side of ``labextension/src/protocol.ts``.

``docs/comm-protocol.md`` is the contract. Each TypedDict here has the name and the fields of the
TypeScript interface it mirrors (fields of a ``total=False`` part are optional there, ``name?:``);
the panel model's records are annotated with them, so mypy checks every message the kernel
builds, and ``tests/unit/test_comm_schema.py`` checks that the two files agree field by field.
A change of either side bumps ``SCHEMA_VERSION`` in both.
"""

from __future__ import annotations

from typing import Literal, TypedDict, Union

SCHEMA_VERSION = 5
COMM_TARGET = "nbdist"

TaskState = Literal["pending", "scheduled", "running", "finished", "failed"]


class LibraryCall(TypedDict):
    """The mark of a call that one of nbdist's libraries made (`nbdist.events.marks`)."""
    library: str
    run: str
    member: str
    role: str  # "control": plumbing, folded away by default; "work": runs the member's code


class _TaskFields(TypedDict):
    id: str
    name: str
    state: str
    deps: list[str]
    dep_tasks: list[str]
    returns: list[str]
    parent: str | None
    actor: str | None
    submitter: str | None
    group: str
    node: str | None
    worker: int | None
    submitted: float | None
    started: float | None
    ended: float | None
    error_type: str | None
    error: str | None
    attempt: int
    stdout: list[str]


class Task(_TaskFields, total=False):
    held: bool  # held by step-through mode: ready, waiting for a step
    paused: str  # present while it is stopped in the debugger: where ("file:line (function)")
    library_call: LibraryCall  # present when a library made the call


class StepStatus(TypedDict):
    on: bool  # step-through mode: each ready task is held until a step releases it
    held: int  # tasks held now


class _GroupFields(TypedDict):
    id: str
    name: str
    submitter: str | None
    counts: dict[str, int]
    total: int


class Group(_GroupFields, total=False):
    library_call: LibraryCall  # present when a library made the group's calls


class _StoredObjectFields(TypedDict):
    id: str
    size: int
    node: str
    locations: list[str]
    owner: str
    task: str | None
    in_shared_memory: bool
    state: str
    created: float


class StoredObject(_StoredObjectFields, total=False):
    refs: int | None  # refs the driver holds (None: not known)
    pinned: bool  # an argument of a task that has not finished
    spilled: bool  # moved to disk by the node


class _WaitFields(TypedDict):
    id: str
    call: str
    num_returns: int
    total: int
    ready: int
    submitter: str | None
    done: bool
    timed_out: bool
    started: float
    ended: float | None


class Wait(_WaitFields, total=False):
    library_call: LibraryCall  # present when a library waits (Tune's, Train's controller)


class Worker(TypedDict):
    id: str
    node: str
    pid: int
    state: str
    task: str | None
    task_name: str | None
    tasks_done: int
    busy_s: float
    spans: list[list[object]]


class ClusterNode(TypedDict):
    id: str
    state: str
    address: str | None
    resources: dict[str, float]
    workers: int
    running: int
    capacity: float
    utilization: float
    objects: int
    bytes: int
    shm_bytes: int


class Actor(TypedDict):
    id: str
    class_name: str
    name: str | None
    state: str
    restarts: int
    reason: str | None


class Totals(TypedDict):
    tasks: int
    pending: int
    scheduled: int
    running: int
    finished: int
    failed: int
    objects: int
    objects_freed: int
    bytes: int
    output_lines: int
    dropped_events: int


class RunMember(TypedDict):
    id: str
    status: str
    iteration: int
    config: dict[str, str]
    metrics: dict[str, float]
    note: str
    reports: int
    curves: dict[str, list[list[float]]]
    marks: list[list[object]]
    updated: float


class Run(TypedDict):
    id: str
    library: str
    name: str
    metrics: list[str]
    members: dict[str, RunMember]
    updated: float


class _AppMetricFields(TypedDict):
    name: str
    kind: str  # "counter", "gauge" or "histogram"
    description: str
    tags: dict[str, str]


class AppMetric(_AppMetricFields, total=False):
    """A row of `nbdist.util.metrics.snapshot()`: one metric with one set of tag values."""

    value: float  # counters and gauges
    # Histograms: how many values were observed, their sum, and the count per bucket (one
    # bucket more than boundaries: the values above the last).
    count: int
    sum: float
    boundaries: list[float]
    buckets: list[int]


class PlacementGroup(TypedDict):
    id: str
    name: str
    strategy: str
    state: str
    bundles: list[dict[str, float]]


class _StateFields(TypedDict):
    schema: int
    seq: int
    time: float
    grouped: bool
    cluster: bool
    tasks: dict[str, Task]
    groups: dict[str, Group]
    group_edges: list[list[object]]
    objects: dict[str, StoredObject]
    waits: dict[str, Wait]
    workers: dict[str, Worker]
    nodes: dict[str, ClusterNode]
    actors: dict[str, Actor]
    totals: Totals


class StateMessage(_StateFields, total=False):
    as_of: float  # every event record published before this time is in the message
    news_since: float  # on deltas with new records: each was published after this time
    runs: dict[str, Run]  # library runs (Tune searches, Train runs): see docs/comm-protocol.md
    step: StepStatus  # step-through mode
    # The application metrics and placement groups: whole lists, in a delta only when changed.
    metrics: list[AppMetric]
    placement_groups: list[PlacementGroup]


class Snapshot(StateMessage):
    type: Literal["snapshot"]


class _RunsRemoved(TypedDict, total=False):
    runs_removed: list[str]


class Delta(StateMessage, _RunsRemoved):
    type: Literal["delta"]
    tasks_removed: list[str]
    objects_removed: list[str]
    waits_removed: list[str]


class ErrorMessage(TypedDict):
    schema: int
    type: Literal["error"]
    message: str


KernelMessage = Union[Snapshot, Delta, ErrorMessage]

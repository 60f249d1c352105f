"""``nbdist.util.state``: Ray's state API (``ray.util.state``) over the event stream.

Each call folds the records of the current cluster that the driver's event history holds
(``nbdist.events.recent``, bounded by ``config.event_buffer``) into rows named as Ray names
them: a task is PENDING_NODE_ASSIGNMENT once submitted, RUNNING once a worker started it, then
FINISHED or FAILED (a running task a cancel interrupted is FINISHED, as Ray lists it; one
cancelled before it started is FAILED; a retry sends it back to PENDING_NODE_ASSIGNMENT with its attempt number
raised); an actor is ALIVE from its creation, RESTARTING after a restart notice until its next
call runs, DEAD when it died; an object is listed from its creation until it is freed. Nodes
come from ``nbdist.nodes()`` and workers from the timeline's worker table
(``nbdist.events.workers``), placement groups from ``placement_group_table()``. The same fold runs on both backends, since the Ray backend
publishes the same records (Ray's own state API needs the dashboard, which a notebook's Ray
cluster does not start).

Rows are dataclasses that also answer ``row["field"]`` (Ray's rows are read both ways).
``filters`` are ``(key, "=" | "!=", value)`` triples; string values compare
case-insensitively, as Ray's do. ``limit`` keeps the first rows (oldest first), ``detail``
adds the columns Ray marks as detail-only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import nbdist
from nbdist import events as ev

DEFAULT_LIMIT = 100
Filters = Iterable[tuple[str, str, Any]]


class _Row:
    _detail: tuple[str, ...] = ()

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)

    def asdict(self, detail: bool = True) -> dict[str, Any]:
        out = dataclasses.asdict(self)  # type: ignore[call-overload]
        if not detail:
            for key in self._detail:
                out.pop(key, None)
        return out


@dataclass
class TaskState(_Row):
    task_id: str
    name: str
    state: str
    type: str
    func_or_class_name: str
    attempt_number: int = 0
    actor_id: str | None = None
    parent_task_id: str | None = None
    node_id: str | None = None
    worker_pid: int | None = None
    error_type: str | None = None
    error_message: str | None = None
    creation_time_ms: int | None = None
    start_time_ms: int | None = None
    end_time_ms: int | None = None
    _detail = ("error_message", "creation_time_ms", "start_time_ms", "end_time_ms")


@dataclass
class ActorState(_Row):
    actor_id: str
    class_name: str
    state: str
    name: str | None = None
    num_restarts: int = 0
    death_cause: str | None = None
    _detail = ("death_cause",)


@dataclass
class ObjectState(_Row):
    object_id: str
    object_size: int
    node_id: str
    task_id: str | None
    owner: str
    in_shared_memory: bool
    spilled: bool = False
    _detail = ("in_shared_memory",)


@dataclass
class NodeState(_Row):
    node_id: str
    node_ip: str
    state: str
    resources_total: dict[str, float] = field(default_factory=dict)
    is_head_node: bool = False
    _detail = ()


@dataclass
class WorkerState(_Row):
    worker_id: str
    pid: int
    node_id: str
    is_alive: bool
    worker_type: str = "WORKER"
    _detail = ()


@dataclass
class PlacementGroupState(_Row):
    placement_group_id: str
    name: str
    state: str
    creator_job_id: str | None = None
    bundles: list[dict[str, Any]] | None = None
    is_detached: bool | None = None
    stats: dict[str, Any] | None = None
    _detail = ("bundles", "is_detached", "stats")


def _history() -> list[ev.Event]:
    return ev.current_cluster(ev.recent())


def _fold_tasks() -> dict[str, TaskState]:
    tasks: dict[str, TaskState] = {}
    for rec in _history():
        if isinstance(rec, ev.TaskSubmitted):
            kind = ("ACTOR_CREATION_TASK" if rec.actor_id and rec.name.endswith(".__init__")
                    else "ACTOR_TASK" if rec.actor_id else "NORMAL_TASK")
            tasks[rec.task_id] = TaskState(
                rec.task_id, rec.name, "PENDING_NODE_ASSIGNMENT", kind, rec.name,
                actor_id=rec.actor_id, parent_task_id=rec.parent_task,
                creation_time_ms=int(rec.time * 1000))
            continue
        task = tasks.get(getattr(rec, "task_id", ""))
        if task is None:
            continue
        if isinstance(rec, ev.TaskStarted):
            task.state, task.node_id, task.worker_pid = "RUNNING", rec.node_id, rec.worker_pid
            task.start_time_ms = int(rec.time * 1000)
        elif isinstance(rec, ev.TaskFinished):
            task.state, task.node_id, task.worker_pid = "FINISHED", rec.node_id, rec.worker_pid
            task.end_time_ms = int(rec.time * 1000)
        elif isinstance(rec, ev.TaskFailed):
            if task.state == "RUNNING" and rec.error_type == "TaskCancelledError":
                task.state = "FINISHED"  # as Ray's: its worker ended it (with the cancel error)
            else:
                task.state, task.error_type = "FAILED", rec.error_type
                task.error_message = rec.message
            task.end_time_ms = int(rec.time * 1000)
        elif isinstance(rec, ev.TaskRetried):
            task.state, task.attempt_number = "PENDING_NODE_ASSIGNMENT", rec.attempt
    return tasks


def _fold_actors() -> dict[str, ActorState]:
    actors: dict[str, ActorState] = {}
    for rec in _history():
        if isinstance(rec, ev.ActorCreated):
            actors[rec.actor_id] = ActorState(rec.actor_id, rec.class_name, "ALIVE", rec.name)
        elif isinstance(rec, ev.ActorRestarted) and rec.actor_id in actors:
            actors[rec.actor_id].state = "RESTARTING"
            actors[rec.actor_id].num_restarts = rec.restarts
        elif isinstance(rec, ev.ActorDied) and rec.actor_id in actors:
            actors[rec.actor_id].state, actors[rec.actor_id].death_cause = "DEAD", rec.reason
        elif (isinstance(rec, ev.TaskStarted) and rec.name and "." in rec.name):
            for actor in actors.values():
                if actor.state == "RESTARTING" and rec.name.startswith(actor.class_name + "."):
                    actor.state = "ALIVE"
    return actors


def _fold_objects() -> dict[str, ObjectState]:
    objects: dict[str, ObjectState] = {}
    for rec in _history():
        if isinstance(rec, ev.ObjectCreated):
            objects[rec.object_id] = ObjectState(rec.object_id, rec.size, rec.node_id,
                                                 rec.task_id, rec.owner, rec.in_shared_memory)
        elif isinstance(rec, ev.ObjectFreed):
            objects.pop(rec.object_id, None)
        elif isinstance(rec, ev.ObjectSpilled) and rec.object_id in objects:
            objects[rec.object_id].spilled = True
        elif isinstance(rec, ev.ObjectRestored) and rec.object_id in objects:
            objects[rec.object_id].spilled = False
    return objects


def _matches(row: _Row, filters: Filters | None) -> bool:
    for key, op, value in filters or ():
        if op not in ("=", "!="):
            raise ValueError(f"filter predicate {op!r} is not supported: use '=' or '!='.")
        have = row.get(key, _MISSING)
        if have is _MISSING:
            raise ValueError(f"{key!r} is no column of {type(row).__name__}; columns: "
                             f"{', '.join(f.name for f in dataclasses.fields(row))}.")  # type: ignore[arg-type]
        same = (str(have).lower() == str(value).lower() if isinstance(value, str) or
                isinstance(have, str) else have == value)
        if same != (op == "="):
            return False
    return True


_MISSING = object()


def _select(rows: Iterable[Any], filters: Filters | None, limit: int, detail: bool
            ) -> list[Any]:
    out = [row for row in rows if _matches(row, filters)][:limit]
    if not detail:
        for row in out:
            for key in row._detail:
                setattr(row, key, None)
    return out


def list_tasks(address: str | None = None, filters: Filters | None = None,
               limit: int = DEFAULT_LIMIT, timeout: int = 30, detail: bool = False,
               raise_on_missing_output: bool = True) -> list[TaskState]:
    """Tasks of this cluster, oldest first (Ray's ``list_tasks``)."""
    return _select(_fold_tasks().values(), filters, limit, detail)


def list_actors(address: str | None = None, filters: Filters | None = None,
                limit: int = DEFAULT_LIMIT, timeout: int = 30, detail: bool = False,
                raise_on_missing_output: bool = True) -> list[ActorState]:
    """Actors of this cluster (Ray's ``list_actors``)."""
    return _select(_fold_actors().values(), filters, limit, detail)


def list_objects(address: str | None = None, filters: Filters | None = None,
                 limit: int = DEFAULT_LIMIT, timeout: int = 30, detail: bool = False,
                 raise_on_missing_output: bool = True) -> list[ObjectState]:
    """Objects alive in the cluster's stores (Ray's ``list_objects``)."""
    return _select(_fold_objects().values(), filters, limit, detail)


def list_nodes(address: str | None = None, filters: Filters | None = None,
               limit: int = DEFAULT_LIMIT, timeout: int = 30, detail: bool = False,
               raise_on_missing_output: bool = True) -> list[NodeState]:
    """Nodes of the cluster (Ray's ``list_nodes``), from ``nbdist.nodes()``."""
    rows = []
    for i, n in enumerate(nbdist.nodes()):
        rows.append(NodeState(str(n["NodeID"]), str(n.get("NodeManagerAddress", "")),
                              "ALIVE" if n.get("Alive") else "DEAD",
                              dict(n.get("Resources") or {}), i == 0))
    return _select(rows, filters, limit, detail)


def list_workers(address: str | None = None, filters: Filters | None = None,
                 limit: int = DEFAULT_LIMIT, timeout: int = 30, detail: bool = False,
                 raise_on_missing_output: bool = True) -> list[WorkerState]:
    """Worker processes seen in this cluster (Ray's ``list_workers``)."""
    rows = [WorkerState(f"{w.node_id}:{w.pid}", w.pid, w.node_id, w.state != "down")
            for w in ev.workers()]
    return _select(rows, filters, limit, detail)


def list_placement_groups(address: str | None = None, filters: Filters | None = None,
                          limit: int = DEFAULT_LIMIT, timeout: int = 30, detail: bool = False,
                          raise_on_missing_output: bool = True) -> list[PlacementGroupState]:
    """Placement groups of the cluster (Ray's ``list_placement_groups``), from
    ``placement_group_table()``; a bundle is ``{"bundle_id", "node_id", "unit_resources"}``."""
    return _select(_placement_groups(), filters, limit, detail)


def _placement_groups() -> list[PlacementGroupState]:
    from nbdist.util.placement_group import placement_group_table

    rows = []
    for pg_id, entry in placement_group_table().items():
        nodes = entry.get("bundles_to_node_id") or {}
        bundles = [{"bundle_id": f"{pg_id}_{i}", "node_id": nodes.get(i),
                    "unit_resources": dict(res)}
                   for i, res in sorted((entry.get("bundles") or {}).items())]
        rows.append(PlacementGroupState(str(pg_id), str(entry.get("name") or ""),
                                        str(entry.get("state", "")), None, bundles,
                                        bool(entry.get("is_detached")),
                                        dict(entry.get("stats") or {})))
    return rows


def get_task(id: str, address: str | None = None, timeout: int = 30,
             _explain: bool = False) -> TaskState | None:
    """The task with this hex id, or None (Ray's ``get_task``)."""
    return _fold_tasks().get(id)


def get_actor(id: str, address: str | None = None, timeout: int = 30,
              _explain: bool = False) -> ActorState | None:
    """The actor with this hex id, or None (Ray's ``get_actor``)."""
    return _fold_actors().get(id)


def get_node(id: str, address: str | None = None, timeout: int = 30,
             _explain: bool = False) -> NodeState | None:
    """The node with this hex id, or None (Ray's ``get_node``)."""
    return next((n for n in list_nodes(limit=1 << 30) if n.node_id == id), None)


def get_worker(id: str, address: str | None = None, timeout: int = 30,
               _explain: bool = False) -> WorkerState | None:
    """The worker with this id (a `list_workers` row's ``worker_id``), or None (Ray's
    ``get_worker``)."""
    return next((w for w in list_workers(limit=1 << 30) if w.worker_id == id), None)


def get_objects(id: str, address: str | None = None, timeout: int = 30,
                _explain: bool = False) -> list[ObjectState]:
    """The live copies of the object with this hex id: a list, empty if it is gone (Ray's
    ``get_objects``; nbdist keeps one row per object)."""
    found = _fold_objects().get(id)
    return [] if found is None else [found]


def get_placement_group(id: str, address: str | None = None, timeout: int = 30,
                        _explain: bool = False) -> PlacementGroupState | None:
    """The placement group with this hex id, or None (Ray's ``get_placement_group``)."""
    return next((g for g in _placement_groups() if g.placement_group_id == id), None)


def summarize_actors(address: str | None = None, timeout: int = 30,
                     raise_on_missing_output: bool = True) -> dict[str, Any]:
    """Actors counted by class and state, in the shape of Ray's ``summarize_actors``:
    ``{"cluster": {"summary": {class: {"class_name", "state_counts"}}, "total_actors",
    "summary_by": "class"}}``."""
    summary: dict[str, dict[str, Any]] = {}
    actors = list(_fold_actors().values())
    for actor in actors:
        entry = summary.setdefault(actor.class_name,
                                   {"class_name": actor.class_name, "state_counts": {}})
        entry["state_counts"][actor.state] = entry["state_counts"].get(actor.state, 0) + 1
    return {"cluster": {"summary": summary, "total_actors": len(actors),
                        "summary_by": "class"}}


def summarize_objects(address: str | None = None, timeout: int = 30,
                      raise_on_missing_output: bool = True) -> dict[str, Any]:
    """Live objects summed up in the shape of Ray's ``summarize_objects``. nbdist records no
    call sites, so (as Ray with call sites off) every object is under the key ``"disabled"``
    with ``callsite_enabled`` False; ``task_state_counts`` counts the state of the task that
    made each object (``"NIL"`` for a put), ``total_num_workers`` its distinct owners.
    ``ref_type_counts`` stays empty: references are not kinds here."""
    tasks = _fold_tasks()
    entry: dict[str, Any] = {"total_objects": 0, "total_size_mb": 0.0, "task_state_counts": {},
                             "task_attempt_number_counts": {}, "ref_type_counts": {}}
    owners, nodes = set(), set()
    for obj in _fold_objects().values():
        task = tasks.get(obj.task_id or "")
        state, attempt = ("NIL", "0") if task is None else (task.state,
                                                            str(task.attempt_number))
        entry["task_state_counts"][state] = entry["task_state_counts"].get(state, 0) + 1
        counts = entry["task_attempt_number_counts"]
        counts[attempt] = counts.get(attempt, 0) + 1
        entry["total_objects"] += 1
        entry["total_size_mb"] += max(obj.object_size, 0) / 1024 ** 2
        owners.add(obj.owner)
        nodes.add(obj.node_id)
    entry["total_num_workers"], entry["total_num_nodes"] = len(owners), len(nodes)
    summary = {"disabled": entry} if entry["total_objects"] else {}
    return {"cluster": {"summary": summary, "total_objects": entry["total_objects"],
                        "total_size_mb": entry["total_size_mb"], "callsite_enabled": False,
                        "summary_by": "callsite"}}


def summarize_tasks(address: str | None = None, timeout: int = 30,
                    raise_on_missing_output: bool = True) -> dict[str, Any]:
    """Tasks counted by function and state, in the shape of Ray's ``summarize_tasks``:
    ``{"cluster": {"summary": {name: {"func_or_class_name", "type", "state_counts"}},
    "total_tasks", "total_actor_tasks", "total_actor_scheduled", "summary_by"}}``."""
    summary: dict[str, dict[str, Any]] = {}
    totals = {"NORMAL_TASK": 0, "ACTOR_TASK": 0, "ACTOR_CREATION_TASK": 0}
    for task in _fold_tasks().values():
        entry = summary.setdefault(task.name, {"func_or_class_name": task.func_or_class_name,
                                               "type": task.type, "state_counts": {}})
        entry["state_counts"][task.state] = entry["state_counts"].get(task.state, 0) + 1
        totals[task.type] += 1
    return {"cluster": {"summary": summary, "total_tasks": totals["NORMAL_TASK"],
                        "total_actor_tasks": totals["ACTOR_TASK"],
                        "total_actor_scheduled": totals["ACTOR_CREATION_TASK"],
                        "summary_by": "func_name"}}


__all__ = [
    "ActorState", "NodeState", "ObjectState", "PlacementGroupState", "TaskState", "WorkerState",
    "get_actor", "get_node", "get_objects", "get_placement_group", "get_task", "get_worker",
    "list_actors", "list_nodes", "list_objects", "list_placement_groups", "list_tasks",
    "list_workers", "summarize_actors", "summarize_objects", "summarize_tasks",
]

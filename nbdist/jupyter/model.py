"""The panel's model: event records folded into tasks, objects, waits, workers (pure, no I/O).

What flows in: batches of `nbdist.events` records, exactly as ``events.subscribe`` delivers
them (``Model.apply(batch)``), and, once grouped, the engine's `events.TaskSummary`
(``Model.apply_summary``). What flows out: JSON-ready dicts in the versioned comm schema of
``docs/comm-protocol.md``: ``snapshot()`` (the whole state) and ``take_delta()`` (full records
of everything that changed since the previous delta, or None when nothing did).

The model is not thread-safe and has no threads: its owner (``bridge.py``) holds one lock
around every call. Nothing here imports IPython or the engine, so unit tests drive it with
hand-made records.

State and invariants (before grouping; see below for after):

    _tasks      task id -> TaskRecord for every task the panel shows individually
    _groups     (function name, submitter) -> GroupRecord; before grouping a group's counts are
                not folded here but counted from ``_tasks`` when a message needs them (the
                engine's tally is the one fold of counts per group, read once grouped)
    _deps       an `events.DepFold` (the engine's tally keeps one too, of the same records):
                which task returns which object (a task's deps resolve to task edges; dropped
                when the object is freed), which tasks wait for which object, and the edges
                between groups (by group id), kept always
    _objects    live object id -> ObjectRecord; freed objects are removed (and reported removed)
    _waits      active waits plus the last ``max_finished_waits`` finished ones (and as many
                of the libraries' own, kept apart: `nbdist.events.marks`); a wait's
                ready count also rises as the objects it waits for are created
    _workers    "node:pid" -> WorkerRecord, _nodes node id -> NodeRecord (both also learnt from the
                node and pid fields of task records); each worker keeps the spans of its last
                WORKER_SPANS tasks for the timeline
    cluster     whether the kernel has a cluster: not an event, set by the bridge

Grouping: past ``group_threshold`` tasks seen (or live objects), the model switches for good
to grouped mode. It then drops its tasks and objects and no longer follows the records of
`HOT_KINDS` (its owner stops asking for them: following every task of a large run cost the
kernel more than the run itself); ``apply_summary`` sets the groups' counts, the edges
between them, the workers' tasks and timelines, the nodes' running tasks and stored objects,
and the totals, from the engine's own tally, as current as the call that read it. Messages
then carry groups with counts, per-node store totals and only the last ``max_failed_kept``
failed tasks individually (with their last output lines), so a message's size is bounded by
the number of groups, workers and waits, never by the number of tasks. The switch is announced
by a snapshot in place of the next delta.

Duplicate records (the bridge replays ``events.recent()`` when it subscribes) are ignored: a
record that would move a task or wait backwards, or re-create a known id, does nothing.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterable
from typing import Any, cast

from nbdist import events as ev
from nbdist.jupyter import schema
from nbdist.jupyter.model_records import (
    FAILED,
    FINISHED,
    GROUPED_OUTPUT_LINES,
    HOT_KINDS,
    MAX_ERROR_CHARS,
    MAX_LINE_CHARS,
    PENDING,
    RECENT_OUTPUT_TASKS,
    RUNNING,
    SCHEDULED,
    STATES,
    TERMINAL,
    Dirty,
    GroupRecord,
    Json,
    NodeRecord,
    ObjectRecord,
    TaskRecord,
    WaitRecord,
    WorkerRecord,
    library_json,
    ms,
)
from nbdist.jupyter.model_records import SCHEMA_VERSION as SCHEMA_VERSION
from nbdist.jupyter.model_records import WORKER_SPANS as WORKER_SPANS
from nbdist.jupyter.runs import RunsFold


class Model:
    """Folds event batches into the panel's state (see the module docstring)."""

    def __init__(self, *, group_threshold: int = 2_000, max_output_lines: int = 50,
                 max_finished_waits: int = 20, max_failed_kept: int = 20,
                 clock: Callable[[], float] = time.time) -> None:
        self.group_threshold = group_threshold
        self.max_output_lines = max_output_lines
        self.max_finished_waits = max_finished_waits
        self.max_failed_kept = max_failed_kept
        self._clock = clock
        self.grouped = False
        self.cluster = False
        self._tasks: dict[str, TaskRecord] = {}
        self._failed: collections.OrderedDict[str, schema.Task] = collections.OrderedDict()
        self._groups: dict[tuple[str, str | None], GroupRecord] = {}
        self._group_ids: dict[str, GroupRecord] = {}
        self._deps = ev.DepFold()
        self._errored: set[str] = set()
        # The driver's ref counts of object ids (set by the bridge: `events.ref_counts`;
        # None: not shown).
        self.ref_counts: Callable[[list[str]], dict[str, int]] | None = None
        self._objects: dict[str, ObjectRecord] = {}
        # Once grouped: the last output lines of recent tasks, for those that then fail.
        self._recent_output: collections.OrderedDict[str, collections.deque[str]] = (
            collections.OrderedDict())
        self._waits: dict[str, WaitRecord] = {}
        self._finished_waits: collections.deque[str] = collections.deque()
        self._library_waits: collections.deque[str] = collections.deque()
        # Waits still missing objects: few at a time, so an object's arrival is checked
        # against each (an index by object cost a list per object of a 100,000-ref get).
        self._open_waits: list[WaitRecord] = []
        self._workers: dict[str, WorkerRecord] = {}
        self._nodes: dict[str, NodeRecord] = {}
        self._actors: dict[str, schema.Actor] = {}
        self.runs = RunsFold()  # library runs: sent as ``runs`` (news only in deltas)
        self._totals: dict[str, int] = {"tasks": 0, **dict.fromkeys(STATES, 0), "objects": 0,
                              "objects_freed": 0, "bytes": 0, "output_lines": 0,
                              "dropped_events": 0}
        self._dirty = Dirty()
        self._resnapshot = False
        # Application metrics and placement groups, as the bridge last read them (not events:
        # it polls them); ``_app_changed``: the next delta carries both lists.
        self._metrics: list[schema.AppMetric] = []
        self._placement_groups: list[schema.PlacementGroup] = []
        self._app_changed = False
        self._seq = 0
        self._handlers: dict[type[ev.Event], Callable[[Any], None]] = {
            ev.TaskSubmitted: self._task_submitted, ev.TaskStarted: self._task_started,
            ev.TaskFinished: self._task_finished, ev.TaskFailed: self._task_failed,
            ev.TaskRetried: self._task_retried, ev.ObjectCreated: self._object_created,
            ev.ObjectFreed: self._object_freed, ev.ObjectSpilled: self._object_spilled,
            ev.ObjectRestored: self._object_spilled, ev.ObjectPinned: self._object_pinned,
            ev.WaitBegun: self._wait_begun,
            ev.WaitProgress: self._wait_progress, ev.WaitDone: self._wait_done,
            ev.ActorCreated: self._actor_created, ev.ActorRestarted: self._actor_restarted,
            ev.ActorDied: self._actor_died, ev.NodeUp: self._node_up,
            ev.NodeDown: self._node_down, ev.WorkerUp: self._worker_up,
            ev.WorkerDown: self._worker_down, ev.Output: self._output,
            ev.EventsDropped: self._events_dropped, ev.RunUpdate: self.runs.apply,
            ev.TaskHeld: self._task_held, ev.StepMode: self._step_mode,
            ev.TaskPaused: self._task_paused,
        }
        self._step: schema.StepStatus = {"on": False, "held": 0}

    # ------------------------------------------------------------ messages
    def apply(self, batch: Iterable[ev.Event]) -> None:
        """Fold a batch of records (unknown kinds are skipped: newer engines add kinds)."""
        handlers = self._handlers
        for event in batch:
            handler = handlers.get(type(event))
            if handler is not None:
                handler(event)

    def snapshot(self) -> schema.Snapshot:
        """The whole state as one message; does not disturb delta tracking."""
        if self.grouped:
            tasks = dict(self._failed)
            objects: dict[str, schema.StoredObject] = {}
        else:
            tasks = {tid: t.to_json() for tid, t in self._tasks.items()}
            objects = {oid: o.to_json() for oid, o in self._objects.items()}
            self._count_groups()
        snap: schema.Snapshot = {
            "schema": SCHEMA_VERSION, "type": "snapshot", "seq": self._seq,
            "time": ms(self._clock()), "grouped": self.grouped, "cluster": self.cluster,
            "tasks": tasks,
            "groups": {g.id: g.to_json() for g in self._groups.values()},
            "group_edges": [[s, d, n] for (s, d), n in self._deps.edges.items()],
            "objects": objects, "waits": {wid: w.to_json() for wid, w in self._waits.items()},
            "workers": {k: w.to_json() for k, w in self._workers.items()},
            "nodes": {k: n.to_json() for k, n in self._nodes.items()},
            "actors": {k: a.copy() for k, a in self._actors.items()},
            "totals": cast(schema.Totals, dict(self._totals)),
            "step": self._step.copy(),
        }
        if self.runs.runs:
            snap["runs"] = self.runs.snapshot()
        if self._metrics or self._placement_groups:
            snap["metrics"] = list(self._metrics)
            snap["placement_groups"] = list(self._placement_groups)
        return snap

    def set_app_state(self, metrics: list[schema.AppMetric],
                      placement_groups: list[schema.PlacementGroup]) -> None:
        """The application metrics and placement groups now; a change goes in the next delta."""
        if (metrics, placement_groups) != (self._metrics, self._placement_groups):
            self._metrics, self._placement_groups = metrics, placement_groups
            self._app_changed = True

    def apply_summary(self, summary: ev.TaskSummary) -> None:
        """Once grouped: groups, edges, workers, nodes and totals as the engine's summary has
        them (ignored before: the records say more)."""
        if not self.grouped:
            return
        dirty = self._dirty
        gids: list[str] = []
        totals = self._totals
        per_state = dict.fromkeys(STATES, 0)
        marks = dict(summary.marks)
        for name, submitter, *counts in summary.groups:
            group = self._group(name, submitter)
            mark = marks.get(len(gids))
            if mark is not None and group.library_call is None:
                group.library_call = library_json(mark)
                dirty.groups.add(group.id)
            gids.append(group.id)
            now = dict(zip(STATES, counts, strict=True))
            if now != group.counts:
                group.counts = now
                dirty.groups.add(group.id)
            for state, n in now.items():
                per_state[state] += n
        for src, dst, n in summary.edges:
            edge = (gids[src], gids[dst])
            if self._deps.edges.get(edge) != n:
                self._deps.edges[edge] = n
                dirty.edges.add(edge)
        for node_id, pid, task_id, task_name, done, busy, spans in summary.workers:
            worker = self._workers.get(f"{node_id}:{pid}") or self._worker(node_id, pid)
            if not self.cluster:  # what ran when the cluster stopped runs no longer
                task_id = task_name = None
            shown = [list(span) for span in spans]
            if (worker.task, worker.task_name, worker.tasks_done, worker.busy) != (
                    task_id, task_name, done, busy) or list(worker.spans) != shown:
                worker.task, worker.task_name, worker.tasks_done = task_id, task_name, done
                worker.busy = busy
                worker.spans = collections.deque(shown, maxlen=WORKER_SPANS)
                dirty.workers.add(worker.key)
        objects = nbytes = 0
        for node_id, running, held, size, shm in summary.nodes:
            node = self._nodes.get(node_id) or self._node(node_id)
            running = running if self.cluster else 0
            if (node.running, node.objects, node.bytes, node.shm_bytes) != (
                    running, held, size, shm):
                node.running, node.objects, node.bytes, node.shm_bytes = (
                    running, held, size, shm)
                dirty.nodes.add(node_id)
            objects += held
            nbytes += size
        before = dict(totals)
        totals.update(per_state, tasks=sum(per_state.values()), objects=objects,
                      bytes=nbytes, objects_freed=summary.objects_freed)
        dirty.totals = dirty.totals or totals != before

    def kinds(self) -> frozenset[str]:
        """The kinds of records the model follows now (fewer once grouped)."""
        every = frozenset(kind.kind for kind in self._handlers)
        return every - HOT_KINDS if self.grouped else every

    def changed_tasks(self) -> int:
        """How many task and object records the next delta carries (none once grouped: then
        a delta's size is bounded by the number of groups)."""
        if self.grouped:
            return 0
        return len(self._dirty.tasks) + len(self._dirty.objects)

    def take_delta(self) -> schema.Snapshot | schema.Delta | None:
        """Everything changed since the previous call, or None if nothing did.

        Right after the switch to grouped mode this returns a snapshot instead."""
        self._refresh_refs()
        dirty = self._dirty
        if not (self._resnapshot or dirty.any() or self.runs.changed() or self._app_changed):
            return None
        self._seq += 1
        self._dirty = Dirty()
        if self._resnapshot:
            self._resnapshot = False
            return self.snapshot()
        if dirty.groups and not self.grouped:
            self._count_groups()
        delta: schema.Delta = {
            "schema": SCHEMA_VERSION, "type": "delta", "seq": self._seq,
            "time": ms(self._clock()), "grouped": self.grouped, "cluster": self.cluster,
            "tasks": self._task_records(dirty.tasks), "tasks_removed": sorted(dirty.tasks_removed),
            "groups": {gid: self._group_ids[gid].to_json() for gid in dirty.groups},
            "group_edges": [[s, d, self._deps.edges[s, d]] for s, d in dirty.edges],
            "objects": {oid: self._objects[oid].to_json() for oid in dirty.objects
                        if oid in self._objects},
            "objects_removed": sorted(dirty.objects_removed),
            "waits": {wid: self._waits[wid].to_json() for wid in dirty.waits
                      if wid in self._waits},
            "waits_removed": sorted(dirty.waits_removed),
            "workers": {k: self._workers[k].to_json() for k in dirty.workers},
            "nodes": {k: self._nodes[k].to_json() for k in dirty.nodes},
            "actors": {k: self._actors[k].copy() for k in dirty.actors},
            "totals": cast(schema.Totals, dict(self._totals)),
        }
        if dirty.step:
            delta["step"] = self._step.copy()
        if self.runs.changed():
            delta["runs"], removed = self.runs.take_delta()
            if removed:
                delta["runs_removed"] = removed
        if self._app_changed:
            self._app_changed = False
            delta["metrics"] = list(self._metrics)
            delta["placement_groups"] = list(self._placement_groups)
        return delta

    def _task_records(self, ids: set[str]) -> Json:
        if self.grouped:
            return {tid: self._failed[tid] for tid in ids if tid in self._failed}
        return {tid: self._tasks[tid].to_json() for tid in ids if tid in self._tasks}

    def _refresh_refs(self) -> None:
        """Objects whose driver ref count changed become part of the next delta."""
        count = self.ref_counts
        if count is None or self.grouped or not self._objects:
            return
        counts = count(list(self._objects))
        dirty = self._dirty.objects
        for obj in self._objects.values():
            refs = counts.get(obj.id)
            if refs != obj.refs:
                obj.refs = refs
                dirty.add(obj.id)

    def _object_spilled(self, e: ev.ObjectSpilled | ev.ObjectRestored) -> None:
        obj = self._objects.get(e.object_id)  # (none once grouped)
        spilled = type(e) is ev.ObjectSpilled
        if obj is not None and obj.spilled != spilled:
            obj.spilled = spilled
            self._dirty.objects.add(obj.id)

    def _object_pinned(self, e: ev.ObjectPinned) -> None:
        obj = self._objects.get(e.object_id)  # (none once grouped)
        if obj is not None and obj.held != e.pinned:
            obj.held = e.pinned
            self._dirty.objects.add(obj.id)

    def _use(self, task: TaskRecord, delta: int) -> None:
        for dep in task.deps:
            obj = self._objects.get(dep)
            if obj is not None:
                before = obj.uses > 0
                obj.uses = max(0, obj.uses + delta)
                if (obj.uses > 0) != before and not self.grouped:
                    self._dirty.objects.add(obj.id)

    def set_cluster(self, up: bool) -> None:
        """Whether the kernel has a cluster now (the bridge asks ``nbdist.is_initialized()``).

        A cluster that stops says nothing of its actors, workers and nodes (its processes just
        end): they are gone with it, and shown so."""
        if up == self.cluster:
            return
        self.cluster = up
        self._dirty.totals = True
        if up:
            return
        for actor in self._actors.values():
            if actor["state"] == "alive":
                actor["state"], actor["reason"] = "dead", "the cluster stopped"
                self._dirty.actors.add(actor["id"])
        for worker in self._workers.values():
            if worker.state == "up" or worker.task is not None:
                worker.state, worker.task, worker.task_name = "down", None, None
                self._dirty.workers.add(worker.key)
        for node in self._nodes.values():
            node.state, node.running, node.workers = "down", 0, 0
            self._dirty.nodes.add(node.id)

    def nodes_up(self) -> set[str]:
        return {n.id for n in self._nodes.values() if n.state == "up"}

    def nodes_without_info(self) -> list[str]:
        """Nodes learnt only from task or worker records (no NodeUp yet: no resources)."""
        return [n.id for n in self._nodes.values() if n.address is None]

    # ------------------------------------------------------------ tasks
    def _group(self, name: str, submitter: str | None) -> GroupRecord:
        group = self._groups.get((name, submitter))
        if group is None:
            group = GroupRecord(f"g{len(self._groups) + 1}", name, submitter)
            self._groups[name, submitter] = group
            self._group_ids[group.id] = group
        return group

    def _count_groups(self) -> None:
        """Before grouping: each group's counts per state, from the tasks shown (one pass; a
        message needs them, a record does not)."""
        for group in self._groups.values():
            group.counts = dict.fromkeys(STATES, 0)
        ids = self._group_ids
        for task in self._tasks.values():
            ids[task.group].counts[task.state] += 1

    def _move(self, task: TaskRecord, state: str) -> None:
        if state != SCHEDULED:
            task.held = False  # started or ended (or waiting for its arguments to retry)
        if state != RUNNING:  # (its pause may be recorded before its start)
            task.paused = None
        totals = self._totals
        totals[task.state] -= 1
        totals[state] += 1
        task.state = state
        self._dirty.groups.add(task.group)
        self._dirty.tasks.add(task.id)

    def _task_submitted(self, e: ev.TaskSubmitted) -> None:
        tid, tasks = e.task_id, self._tasks
        if tid in tasks or self.grouped:
            return
        group = self._groups.get((e.name, e.submitter)) or self._group(e.name, e.submitter)
        gid = group.id
        if e.library_call is not None and group.library_call is None:
            group.library_call = library_json(e.library_call)
        missing, dep_tasks, edges = self._deps.submitted(tid, gid, e.deps, e.returns,
                                                         self._available)
        if edges:
            self._dirty.edges.update(edges)
        task = tasks[tid] = TaskRecord(e, gid, tuple(dep_tasks), missing)
        state = PENDING if missing else SCHEDULED
        task.state = state
        totals = self._totals
        totals["tasks"] += 1
        totals[state] += 1
        self._dirty.groups.add(gid)
        self._dirty.tasks.add(tid)
        self._use(task, 1)
        if totals["tasks"] > self.group_threshold:
            self._switch_to_groups()

    def _task_started(self, e: ev.TaskStarted) -> None:
        task = self._tasks.get(e.task_id)
        if task is None or task.state not in (PENDING, SCHEDULED):  # (none once grouped)
            return
        task.node, task.worker, task.started = e.node_id, e.worker_pid, e.time
        self._move(task, RUNNING)
        worker = self._worker(e.node_id, e.worker_pid)
        worker.task, worker.task_name = task.id, task.name
        self._nodes[e.node_id].running += 1
        self._dirty.nodes.add(e.node_id)

    def _task_held(self, e: ev.TaskHeld) -> None:
        self._step["held"] += 1  # (the next StepMode record says how many are left)
        self._dirty.step = True
        task = self._tasks.get(e.task_id)  # (none once grouped)
        if task is not None and task.state in (PENDING, SCHEDULED):
            task.held = True
            self._dirty.tasks.add(task.id)

    def _task_paused(self, e: ev.TaskPaused) -> None:
        task = self._tasks.get(e.task_id)  # (none once grouped)
        if task is not None and task.state not in TERMINAL:  # (or not seen started yet)
            task.paused = e.where if e.paused else None
            self._dirty.tasks.add(task.id)

    def _step_mode(self, e: ev.StepMode) -> None:
        self._step = {"on": e.on, "held": e.held}
        self._dirty.step = True
        for tid in e.released:
            task = self._tasks.get(tid)
            if task is not None and task.held:
                task.held = False
                self._dirty.tasks.add(tid)

    def _task_ended(self, task: TaskRecord, end: float, duration: float, pid: int,
                    failed: bool = False, started: float = 0.0) -> None:
        """Bookkeeping shared by finished and failed: times, the worker and node freed."""
        task.ended = end
        if started > 0:
            task.started, task.ended = started, started + duration  # the worker's own clock
        elif task.started is None:
            task.started = end - duration
        task.worker = task.worker or pid or None
        if task.node is None or task.worker is None:
            return  # a failure before any worker ran it (e.g. a failed dependency)
        if task.state == RUNNING:
            self._nodes[task.node].running -= 1
            self._dirty.nodes.add(task.node)
        worker = self._worker(task.node, task.worker)
        if worker.task == task.id:
            worker.task = worker.task_name = None
        worker.tasks_done += 1
        worker.busy += duration
        worker.spans.append([task.id, task.name, ms(task.started), ms(end), failed])

    def _task_finished(self, e: ev.TaskFinished) -> None:
        task = self._tasks.get(e.task_id)  # (none once grouped)
        if task is None or task.state in TERMINAL:
            return
        task.node = task.node or e.node_id
        self._task_ended(task, e.time, e.duration, e.worker_pid, started=e.started)
        self._use(task, -1)
        self._move(task, FINISHED)

    def _task_failed(self, e: ev.TaskFailed) -> None:
        error = e.message
        if e.traceback:
            error = f"{e.message}\n\n{e.traceback}"
        if self.grouped:
            self._keep_failed(e, error)
            return
        task = self._tasks.get(e.task_id)
        if task is None or task.state in TERMINAL:
            return
        self._task_ended(task, e.time, e.duration, e.worker_pid, failed=True, started=e.started)
        self._use(task, -1)
        task.error_type = e.error_type
        task.error = error[:MAX_ERROR_CHARS]
        self._move(task, FAILED)
        for ret in task.returns:
            # A failed task's returns hold its error: for get/wait they are ready.
            self._errored.add(ret)
            self._deps_ready(ret)
            self._object_ready(ret)

    def _keep_failed(self, e: ev.TaskFailed, error: str) -> None:
        """Once grouped: the failed task, as its record tells it (the counts come with the
        summary)."""
        if e.task_id in self._failed:
            return
        started = e.started or e.time - e.duration
        self._failed[e.task_id] = {
            "id": e.task_id, "name": e.name, "state": FAILED, "deps": [], "dep_tasks": [],
            "returns": [], "parent": None, "actor": None, "submitter": e.submitter,
            "group": self._group(e.name, e.submitter).id, "node": None,
            "worker": e.worker_pid or None, "submitted": None, "started": ms(started),
            "ended": ms(started + e.duration), "error_type": e.error_type,
            "error": error[:MAX_ERROR_CHARS], "attempt": 0,
            "stdout": list(self._recent_output.pop(e.task_id, ()))}
        self._dirty.tasks.add(e.task_id)
        while len(self._failed) > self.max_failed_kept:
            old, _ = self._failed.popitem(last=False)
            self._dirty.tasks.discard(old)
            self._dirty.tasks_removed.add(old)

    def _task_retried(self, e: ev.TaskRetried) -> None:
        task = self._tasks.get(e.task_id)
        if task is None or e.attempt <= task.attempt or task.state == FINISHED:
            return
        task.attempt = e.attempt
        if task.state == RUNNING and task.node is not None:
            self._nodes[task.node].running -= 1
            self._dirty.nodes.add(task.node)
            worker = self._workers.get(f"{task.node}:{task.worker}")
            if worker is not None and worker.task == task.id:
                worker.task = worker.task_name = None
                self._dirty.workers.add(worker.key)
        task.started = task.ended = None
        self._move(task, PENDING)

    def _output(self, e: ev.Output) -> None:
        self._totals["output_lines"] += 1
        self._dirty.totals = True
        line = e.line if len(e.line) <= MAX_LINE_CHARS else e.line[:MAX_LINE_CHARS] + "…"
        if self.grouped:
            recent = self._recent_output.get(e.task_id)
            if recent is None:
                recent = self._recent_output[e.task_id] = collections.deque(
                    maxlen=GROUPED_OUTPUT_LINES)
                if len(self._recent_output) > RECENT_OUTPUT_TASKS:
                    self._recent_output.popitem(last=False)
            recent.append(line if e.stream == "stdout" else "[stderr] " + line)
            return
        task = self._tasks.get(e.task_id)
        if task is None:
            return
        if task.stdout is None:
            task.stdout = collections.deque(maxlen=self.max_output_lines)
        task.stdout.append(line if e.stream == "stdout" else "[stderr] " + line)
        self._dirty.tasks.add(task.id)

    def _switch_to_groups(self) -> None:
        """For good: tasks and objects go (failed tasks stay, the last few); the counts stand
        until the first summary replaces them."""
        self._count_groups()  # they stand until the first summary replaces them
        self.grouped = True
        self._resnapshot = True
        for task in self._tasks.values():
            if task.state == FAILED:
                self._failed[task.id] = task.to_json(GROUPED_OUTPUT_LINES)
        while len(self._failed) > self.max_failed_kept:
            self._failed.popitem(last=False)
        self._tasks = {}
        self._objects = {}
        self._deps.forget_tasks()
        self._errored = set()
        self._open_waits = []

    # ------------------------------------------------------------ objects and waits
    def _object_created(self, e: ev.ObjectCreated) -> None:
        oid, size = e.object_id, e.size
        if oid in self._objects or self.grouped:
            return
        self._objects[oid] = ObjectRecord(e)
        self._dirty.objects.add(oid)
        node = self._node(e.node_id)
        node.objects += 1
        node.bytes += size
        if e.in_shared_memory:
            node.shm_bytes += size
        self._dirty.nodes.add(node.id)
        self._totals["objects"] += 1
        self._totals["bytes"] += size
        self._object_ready(oid)
        if len(self._objects) > self.group_threshold:
            self._switch_to_groups()

    def _object_freed(self, e: ev.ObjectFreed) -> None:
        oid = e.object_id
        self._deps.freed(oid)
        self._errored.discard(oid)
        obj = self._objects.pop(oid, None)  # (none once grouped)
        if obj is None:
            return
        node_id, size, shm = obj.node, obj.size, obj.shm
        node = self._nodes[node_id]
        node.objects -= 1
        node.bytes -= size
        if shm:
            node.shm_bytes -= size
        self._dirty.nodes.add(node.id)
        totals = self._totals
        totals["objects"] -= 1
        totals["bytes"] -= size
        totals["objects_freed"] += 1
        self._dirty.objects.discard(oid)
        self._dirty.objects_removed.add(oid)

    def _available(self, oid: str) -> bool:
        """Whether a task taking ``oid`` need not wait for it: it exists, or holds an error."""
        return oid in self._objects or oid in self._errored

    def _deps_ready(self, oid: str) -> None:
        for tid in self._deps.ready(oid):
            task = self._tasks.get(tid)
            if task is not None and task.state == PENDING:
                task.missing -= 1
                if task.missing <= 0:
                    self._move(task, SCHEDULED)

    def _object_ready(self, oid: str) -> None:
        self._deps_ready(oid)
        complete = False
        for wait in self._open_waits:
            pending = wait.pending
            if oid in pending:
                wait.missing -= pending.pop(oid)
                wait.ready = max(wait.ready, wait.total - wait.missing)
                self._dirty.waits.add(wait.id)
                complete = complete or not pending
        if complete:
            self._open_waits = [w for w in self._open_waits if w.pending]

    def _wait_begun(self, e: ev.WaitBegun) -> None:
        if str(e.wait_id) in self._waits:
            return
        # Once grouped, objects are not followed: its progress records say how far it is.
        known, errored = self._objects, self._errored
        pending = None if self.grouped else collections.Counter(
            o for o in e.object_ids if o not in known and o not in errored)
        wait = self._waits[str(e.wait_id)] = WaitRecord(e, pending)
        if pending:
            self._open_waits.append(wait)
        self._dirty.waits.add(wait.id)

    def _wait_progress(self, e: ev.WaitProgress) -> None:
        wait = self._waits.get(str(e.wait_id))
        if wait is not None and not wait.done and e.ready > wait.ready:
            wait.ready = e.ready
            self._dirty.waits.add(wait.id)

    def _wait_done(self, e: ev.WaitDone) -> None:
        wait = self._waits.get(str(e.wait_id))
        if wait is None or wait.done:
            return
        wait.done, wait.timed_out, wait.ended = True, e.timed_out, e.time
        wait.ready, wait.total = e.ready, e.total
        if wait in self._open_waits:
            self._open_waits.remove(wait)
        wait.pending = collections.Counter()
        self._dirty.waits.add(wait.id)
        # A library's waits (a Tune controller makes one per poll) are bounded on their own,
        # so they never push the user's finished waits out.
        finished = self._finished_waits if wait.library_call is None else self._library_waits
        finished.append(wait.id)
        while len(finished) > self.max_finished_waits:
            old = finished.popleft()
            del self._waits[old]
            self._dirty.waits.discard(old)
            self._dirty.waits_removed.add(old)

    # ------------------------------------------------------------ cluster
    def _node(self, node_id: str) -> NodeRecord:
        node = self._nodes.get(node_id)
        if node is None:
            node = self._nodes[node_id] = NodeRecord(node_id)
            self._dirty.nodes.add(node_id)
        return node

    def _worker(self, node_id: str, pid: int) -> WorkerRecord:
        key = f"{node_id}:{pid}"
        worker = self._workers.get(key)
        if worker is None:
            worker = self._workers[key] = WorkerRecord(key, node_id, pid)
            self._node(node_id).workers += 1
            self._dirty.nodes.add(node_id)
        self._dirty.workers.add(key)
        return worker

    def _node_up(self, e: ev.NodeUp) -> None:
        node = self._node(e.node_id)
        node.state, node.address, node.resources = "up", e.address, dict(e.resources)
        self._dirty.nodes.add(node.id)

    def _node_down(self, e: ev.NodeDown) -> None:
        self._node(e.node_id).state = "down"
        self._dirty.nodes.add(e.node_id)

    def _worker_up(self, e: ev.WorkerUp) -> None:
        worker = self._worker(e.node_id, e.worker_pid)
        if worker.state != "up":
            worker.state = "up"
            self._nodes[e.node_id].workers += 1

    def _worker_down(self, e: ev.WorkerDown) -> None:
        worker = self._worker(e.node_id, e.worker_pid)
        if worker.state == "up":
            worker.state = "down"
            worker.task = worker.task_name = None
            self._nodes[e.node_id].workers -= 1
            self._dirty.nodes.add(e.node_id)

    def _actor_created(self, e: ev.ActorCreated) -> None:
        self._actors[e.actor_id] = {"id": e.actor_id, "class_name": e.class_name,
                                    "name": e.name, "state": "alive", "restarts": 0,
                                    "reason": None}
        self._dirty.actors.add(e.actor_id)

    def _actor_restarted(self, e: ev.ActorRestarted) -> None:
        actor = self._actors.get(e.actor_id)
        if actor is not None:
            actor["restarts"] = e.restarts
            self._dirty.actors.add(e.actor_id)

    def _actor_died(self, e: ev.ActorDied) -> None:
        actor = self._actors.get(e.actor_id)
        if actor is not None:
            actor["state"], actor["reason"] = "dead", e.reason[:MAX_LINE_CHARS]
            self._dirty.actors.add(e.actor_id)

    def _events_dropped(self, e: ev.EventsDropped) -> None:
        # Missed records leave some states stale; the panel shows the count as a warning.
        self._totals["dropped_events"] += e.count
        self._dirty.totals = True

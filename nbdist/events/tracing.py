"""Task timelines from the event stream, in Chrome-trace form (stdlib only: no IPython, no bokeh).

``nbdist.timeline(filename=None)`` (Ray's ``ray.timeline``) returns one Chrome-trace *complete*
event (``"ph": "X"``) per task execution and, with a filename, writes them as JSON in the
``{"traceEvents": [...]}`` form that ``chrome://tracing`` and https://ui.perfetto.dev open.

    name   the task's function (or ``Class.method``)     ts, dur   start and length, in µs
    pid    the node (1, 2, … in order of appearance;    tid       the worker's process id
           a ``process_name`` metadata event names it)
    args   task_id, state ("finished", "failed", or "retried": an attempt that ended because
           its worker died and was retried), node_id, attempt; error_type and error if failed
    cname  "terrible" (red) for failed attempts, "good" (green) for the others

Metadata events (``"ph": "M"``) name each node's row and each worker's row.

Where the data comes from: one subscription to `nbdist.events` kept by a process-wide
`Recording`: TaskStarted opens an execution, TaskFinished / TaskFailed / TaskRetried close it;
WorkerUp / WorkerDown and the task records also give the workers' state (``workers()``, shown by
``%nbdist status``). A task that failed before any worker ran it (e.g. its dependency failed)
has no execution. `nbdist.events` answers ``executions``, ``execution_count``, ``workers``,
``timeline_version`` and ``current_cluster`` from this record (`SOURCE`), so the notebook layer
reads the timeline through the event API, never this module.

The record starts with the cluster: it holds the executions of the cluster running now (or of
the last one, after ``shutdown``), and is emptied when a new cluster starts. It is bounded: the
last ``MAX_EXECUTIONS`` (100,000) finished executions are kept, older ones are dropped (counted in
``Recording.dropped``), plus at most ``MAX_RUNNING`` open ones. The subscription begins when
the engine calls ``cluster_started()`` as a cluster starts, or else the first time anything asks
for the record (``timeline()``, ``%nbdist status``, ``nbdist.show()``); in that case what
happened before is replayed from the event history (``events.recent()``, cut at the start of the
current cluster), so a run that published more records than the history holds before that first
call loses its oldest executions.

Times: a bar is where the worker measured it (``started`` and ``duration`` of TaskFinished /
TaskFailed, on the worker's clock). For records without a start, its length is the duration and
its start is the TaskStarted time, or, when that would put its end after the time of the record that reported the end (the start
notice can come a moment late), the end record's time minus the duration; tasks whose start is
not reported separately (nested tasks) also end at their end record's time. So a bar always lies
between the task's submission and the moment its end was known.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import os
import threading
from collections.abc import Iterable
from typing import Any

from nbdist import events as ev
from nbdist.backends.base import current
from nbdist.events.records import FAILED, FINISHED, RETRIED, RUNNING, Execution, WorkerState

MAX_EXECUTIONS = 100_000
MAX_RUNNING = 10_000

_CNAME = {FINISHED: "good", FAILED: "terrible", RETRIED: "terrible", RUNNING: "generic_work"}

Json = dict[str, Any]


class TaskTimeline:
    """Executions and workers folded from event records (pure: no threads, no I/O).

    ``apply(batch)`` takes records as ``events.subscribe`` delivers them. Not thread-safe: the
    owner (`Recording`) holds a lock around every call."""

    def __init__(self, max_executions: int = MAX_EXECUTIONS,
                 max_running: int = MAX_RUNNING) -> None:
        self.max_running = max_running
        self._done: collections.deque[Execution] = collections.deque(maxlen=max_executions)
        self._running: collections.OrderedDict[str, Execution] = collections.OrderedDict()
        # Task ids whose execution ended: a late duplicate TaskStarted must not reopen them.
        self._ended: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._attempts: dict[str, int] = {}
        self._workers: dict[tuple[str, int], WorkerState] = {}
        self._pid_node: dict[int, str] = {}
        self._nodes: dict[str, int] = {}  # node id -> trace pid (1, 2, ...)
        self.dropped = 0  # finished executions pushed out by the bound
        self.events_dropped = 0  # records the event bus dropped before we saw them
        self.version = 0  # bumped on every change (viewers redraw when it moves)
        self.default_node: str | None = None  # for records that name no node

    # ------------------------------------------------------------ folding
    def apply(self, batch: Iterable[ev.Event]) -> None:
        changed = False
        for e in batch:
            if isinstance(e, ev.TaskStarted):
                changed |= self._started(e)
            elif isinstance(e, ev.TaskFinished):
                changed |= self._ended_ok(e)
            elif isinstance(e, ev.TaskFailed):
                changed |= self._failed(e)
            elif isinstance(e, ev.TaskRetried):
                changed |= self._retried(e)
            elif isinstance(e, ev.WorkerUp):
                self._worker(e.node_id, e.worker_pid).state = "up"
                changed = True
            elif isinstance(e, ev.WorkerDown):
                worker = self._worker(e.node_id, e.worker_pid)
                worker.state, worker.task_id, worker.task_name = "down", None, None
                changed = True
            elif isinstance(e, ev.NodeUp):
                self._node_pid(e.node_id)
            elif isinstance(e, ev.EventsDropped):
                self.events_dropped += e.count
                changed = True
        if changed:
            self.version += 1

    def _node_pid(self, node_id: str) -> int:
        pid = self._nodes.get(node_id)
        if pid is None:
            pid = self._nodes[node_id] = len(self._nodes) + 1
        return pid

    def _worker(self, node_id: str, pid: int) -> WorkerState:
        worker = self._workers.get((node_id, pid))
        if worker is None:
            worker = self._workers[node_id, pid] = WorkerState(node_id, pid)
            self._pid_node[pid] = node_id
            self._node_pid(node_id)
        return worker

    def _started(self, e: ev.TaskStarted) -> bool:
        if e.task_id in self._running or e.task_id in self._ended:
            return False
        run = Execution(e.task_id, e.name, e.node_id, e.worker_pid, e.time,
                        attempt=self._attempts.get(e.task_id, 0))
        self._running[e.task_id] = run
        while len(self._running) > self.max_running:
            _, lost = self._running.popitem(last=False)  # never closed: records were lost
            self._free_worker(lost)
        worker = self._worker(e.node_id, e.worker_pid)
        worker.state, worker.task_id, worker.task_name = "up", e.task_id, e.name
        return True

    def _close(self, task_id: str, name: str, end: float, duration: float,
               node_id: str | None, pid: int, started: float = 0.0) -> Execution | None:
        run = self._running.pop(task_id, None)
        if run is None:
            if task_id in self._ended or not pid:
                return None  # a duplicate, or a failure before any worker ran it
            node = node_id or self._pid_node.get(pid) or self.default_node or "?"
            run = Execution(task_id, name, node, pid, end - duration,
                            attempt=self._attempts.get(task_id, 0))
            self._worker(node, pid)
        if started > 0 and duration >= 0:
            # The worker's own clock: exact.
            run.start, run.end = started, started + duration
        elif duration > 0:
            # The length is the worker's own measure. The start notice may come a moment after
            # the real start, the end record a moment after the real end: the bar ends at the
            # earlier of the two estimates, so it never extends past the moment the end was
            # known, and keeps the measured length.
            run.end = run.start + duration
            if run.start <= end < run.end:
                run.end, run.start = end, end - duration
        else:
            run.end = max(run.start, end)
        self._ended[task_id] = None
        while len(self._ended) > self.max_running + (self._done.maxlen or 0):
            self._ended.popitem(last=False)
        self._free_worker(run)
        if len(self._done) == self._done.maxlen:
            self.dropped += 1
        self._done.append(run)
        return run

    def _free_worker(self, run: Execution) -> None:
        worker = self._workers.get((run.node_id, run.worker_pid))
        if worker is not None and worker.task_id == run.task_id:
            worker.task_id = worker.task_name = None
            worker.tasks_done += 1

    def _ended_ok(self, e: ev.TaskFinished) -> bool:
        run = self._close(e.task_id, e.name, e.time, e.duration, e.node_id, e.worker_pid,
                          e.started)
        if run is not None:
            run.state = FINISHED
        return run is not None

    def _failed(self, e: ev.TaskFailed) -> bool:
        run = self._close(e.task_id, e.name, e.time, e.duration, None, e.worker_pid,
                          e.started)
        if run is not None:
            run.state, run.error_type, run.error = FAILED, e.error_type, e.message[:2000]
        return run is not None

    def _retried(self, e: ev.TaskRetried) -> bool:
        if e.attempt <= self._attempts.get(e.task_id, 0):
            return False  # a duplicate
        self._attempts[e.task_id] = e.attempt
        run = self._running.get(e.task_id)
        self._ended.pop(e.task_id, None)  # the task may start again
        if run is None:
            return False
        closed = self._close(e.task_id, e.name, e.time, 0.0, run.node_id, run.worker_pid)
        assert closed is not None
        closed.state, closed.error = RETRIED, e.reason[:2000]
        self._ended.pop(e.task_id, None)
        return True

    # ------------------------------------------------------------ reading
    def executions(self, include_running: bool = False,
                   last: int | None = None) -> list[Execution]:
        """Finished executions, oldest first, then the running ones if asked (copies); only
        the ``last`` ones of each when given."""
        done: Iterable[Execution] = self._done
        running: Iterable[Execution] = self._running.values() if include_running else ()
        if last is not None:
            done = reversed(list(itertools.islice(reversed(self._done), last)))
            running = list(running)[-last:]
        return [dataclasses.replace(r) for r in (*done, *running)]

    def count(self, include_running: bool = False) -> int:
        """How many executions the record holds (finished, plus running if asked)."""
        return len(self._done) + (len(self._running) if include_running else 0)

    def workers(self) -> list[WorkerState]:
        """Every worker seen, by node then pid (copies: safe to keep)."""
        return [WorkerState(w.node_id, w.pid, w.state, w.task_id, w.task_name, w.tasks_done)
                for _, w in sorted(self._workers.items())]

    def trace_events(self) -> list[Json]:
        """The Chrome-trace events: metadata naming the rows, then one complete event per
        finished execution, in start order."""
        runs = sorted(self._done, key=lambda r: r.start)
        out: list[Json] = []
        for node_id, pid in self._nodes.items():
            out.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                        "args": {"name": f"node {node_id}"}})
        for (node_id, wpid), _ in sorted(self._workers.items()):
            out.append({"name": "thread_name", "ph": "M", "pid": self._nodes[node_id],
                        "tid": wpid, "args": {"name": f"worker {wpid}"}})
        out.extend(trace_event(r, self._nodes[r.node_id]) for r in runs)
        return out


def trace_event(run: Execution, node_pid: int) -> Json:
    """One execution as a Chrome-trace complete event."""
    end = run.end if run.end is not None else run.start
    args: Json = {"task_id": run.task_id, "state": run.state, "node_id": run.node_id,
                  "attempt": run.attempt}
    if run.error_type is not None:
        args["error_type"] = run.error_type
    if run.error is not None:
        args["error"] = run.error
    return {"name": run.name, "cat": "task", "ph": "X", "ts": round(run.start * 1e6, 1),
            "dur": round(max(0.0, end - run.start) * 1e6, 1), "pid": node_pid,
            "tid": run.worker_pid, "cname": _CNAME[run.state], "args": args}


def write_trace(trace: list[Json], filename: str | os.PathLike[str]) -> None:
    """Write ``trace`` as ``{"traceEvents": [...]}`` JSON (atomically: a temporary file, then a
    rename, so a viewer never opens half a file)."""
    path = os.fspath(filename)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"traceEvents": trace, "displayTimeUnit": "ms"}, f)
    os.replace(tmp, path)


# ---------------------------------------------------------------- the process-wide recording
_NODE_FIELDS = (ev.TaskStarted, ev.TaskFinished, ev.ObjectCreated, ev.NodeUp, ev.NodeDown,
                ev.WorkerUp, ev.WorkerDown)


def current_cluster_history(history: list[ev.Event] | None = None) -> list[ev.Event]:
    """The records of ``history`` (default ``events.recent()``) since the current cluster
    started: those after the last record that names a node of another cluster. (Records that
    name no node and came between that one and the new cluster's first records cannot be told
    apart and are kept: the old cluster's last frees or failures, harmless to a fresh fold.)

    Without a running cluster, the records since the start of the last cluster seen."""
    records = ev.recent() if history is None else history
    nodes = _cluster_nodes()
    if not nodes:
        # No cluster: the last cluster's nodes are those named by the newest records.
        last = next((getattr(e, "node_id", None) for e in reversed(records)
                     if isinstance(e, _NODE_FIELDS) and getattr(e, "node_id", None)), None)
        nodes = {last} if last else set()
    for i in range(len(records) - 1, -1, -1):
        e = records[i]
        # A record with an empty node id names no node (Ray's table can end a task before its
        # worker said where it ran): it cannot tell clusters apart.
        node = getattr(e, "node_id", None)
        if node and isinstance(e, _NODE_FIELDS) and node not in nodes:
            return records[i + 1:]
    return list(records)


def _cluster_nodes() -> set[str]:
    client = current.client
    if client is None or client.closed:
        return set()
    nodes = {client.node_id}
    try:
        nodes.update(str(n["NodeID"]) for n in current.backend.nodes())
    except Exception:  # the node may still be joining the head: its own id is enough
        pass
    return nodes


class Recording:
    """The process-wide record behind ``timeline()``: one subscription, a lock, a TaskTimeline
    (see the module docstring for its start and bounds)."""

    def __init__(self, max_executions: int = MAX_EXECUTIONS) -> None:
        self.max_executions = max_executions
        self._lock = threading.Lock()
        self._timeline = TaskTimeline(max_executions)
        self._client: Any = None  # the driver client of the cluster the record belongs to
        self._unsubscribe: Any = None

    def start(self) -> None:
        """Subscribe (once) and replay the current cluster's history; idempotent."""
        with self._lock:
            if self._unsubscribe is not None:
                self._check_cluster()
                return
            self._client = _live_client()
            self._timeline = self._fresh()
            self._unsubscribe = ev.subscribe(self._on_events)
            history = current_cluster_history()
            # The replay and the first delivered batches may overlap: the timeline ignores
            # executions it already closed or opened.
            self._timeline.apply(history)

    def begin(self) -> None:
        """Start an empty record now (subscribing if needed), without replaying the history:
        for the engine to call as a cluster starts, so the record begins exactly there."""
        with self._lock:
            self._client = _live_client()
            self._timeline = self._fresh()
            if self._unsubscribe is None:
                self._unsubscribe = ev.subscribe(self._on_events)

    def stop(self) -> None:
        with self._lock:
            if self._unsubscribe is not None:
                self._unsubscribe()
                self._unsubscribe = None

    def _fresh(self) -> TaskTimeline:
        tl = TaskTimeline(self.max_executions)
        if self._client is not None:
            tl.default_node = self._client.node_id
        return tl

    def _check_cluster(self) -> None:
        # A different live driver client means a new cluster: the record starts again.
        client = _live_client()
        if client is not None and client is not self._client:
            self._client = client
            self._timeline = self._fresh()

    def _on_events(self, batch: list[ev.Event]) -> None:
        with self._lock:
            self._check_cluster()
            self._timeline.apply(batch)

    def sync(self) -> None:
        """Start if needed, and fold in every record published so far."""
        self.start()
        ev.bus().flush()

    def read(self, fn: Any) -> Any:
        """``fn(task_timeline)`` under the lock (after `sync`)."""
        self.sync()
        return self.peek(fn)

    def peek(self, fn: Any) -> Any:
        """``fn(task_timeline)`` under the lock, with what was delivered so far (cheap)."""
        with self._lock:
            self._check_cluster()
            return fn(self._timeline)

    @property
    def dropped(self) -> int:
        return int(self.read(lambda tl: tl.dropped))


def _live_client() -> Any:
    client = current.client
    return client if client is not None and not client.closed else None


_recording = Recording()


def recording() -> Recording:
    """The process-wide record (started on first use)."""
    return _recording


def cluster_started() -> None:
    """Begin the record for a cluster that is starting (see `Recording.begin`)."""
    _recording.begin()


def timeline(filename: str | os.PathLike[str] | None = None) -> list[Json]:
    """The Chrome-trace events of the task executions of this cluster (see the module
    docstring); with ``filename``, also written there as ``{"traceEvents": [...]}`` JSON for
    ``chrome://tracing`` or Perfetto. Like ``ray.timeline``."""
    trace: list[Json] = _recording.read(lambda tl: tl.trace_events())
    if filename is not None:
        write_trace(trace, filename)
    return trace


def executions(include_running: bool = False) -> list[Execution]:
    """The executions in the record, oldest first (plus those still running, if asked)."""
    return list(_recording.read(lambda tl: tl.executions(include_running)))


def workers() -> list[WorkerState]:
    """Every worker of this cluster seen in the event stream, with the task it runs now."""
    return list(_recording.read(lambda tl: tl.workers()))


class _Source:
    """What `nbdist.events` answers about the timeline (`events.executions` and the rest)."""

    def executions(self, include_running: bool, last: int | None) -> list[Execution]:
        return list(_recording.read(lambda tl: tl.executions(include_running, last)))

    def count(self, include_running: bool) -> int:
        return int(_recording.read(lambda tl: tl.count(include_running)))

    def workers(self) -> list[WorkerState]:
        return workers()

    def version(self) -> int:
        _recording.start()
        return int(_recording.peek(lambda tl: tl.version))

    def current_cluster(self, items: list[Any]) -> list[Any]:
        kept = len(current_cluster_history([ev.build(x) for x in items]))
        return list(items[len(items) - kept:])


SOURCE = _Source()  # (`nbdist.events.tally` hands it to `nbdist.events`)

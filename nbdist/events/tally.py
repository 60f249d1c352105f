"""The driver's tasks folded by function and submitter: what a view of thousands of tasks shows
(layer L2). `events.summary()` and `events.object_info()` read it.

It follows the event stream through a pull queue (`events.EventBus.pull`): the records of
`KINDS` are queued as published and read through `events.fields` (the record's fields, ids as
ints: one handler per record class, never a record built for it), folded at a couple of
microseconds a record: by
the event dispatcher thread at each of its turns, and by each question for what is left, on the
asking thread, so an answer is current as of the call. Following starts with the first question,
after folding the records the event history still keeps; if the queue ever overflows (nobody
asked for a long while), the tally starts again from the history.
A new driver (`reset`) starts from nothing: ids repeat across clusters.

State, under ``lock``:

``tasks``     unfinished task id -> (group key, state, arguments not ready yet, node, pid,
              return ids); plain values, which the garbage collector stops scanning
``groups``    (function name, submitter) -> counts per state (pending, scheduled, running,
              finished, failed); ``order``: the keys as they first appeared
``deps``      an `events.DepFold` (shared with the panel's model): which task returns which
              object, which tasks wait for which, and the edges between groups (keys)
``objects``   live object id -> (node, size, in shared memory, holds an error); ``spilled``:
              those a node has on disk now (not in shared memory meanwhile)
``workers``   (node, pid) -> [task id running or 0, its name, tasks ended, busy seconds,
              the last SPANS tasks ended as (task id, name, started, ended, failed), the
              group key of the last]
``nodes``     node id -> [tasks running, live objects, their bytes, bytes in shared memory]

Running tasks the records have not told yet: a node reports the start of a task in a notice
batched for ~20 ms, and a task that ends first has none (its end says when it started). A run
of short tasks thus reaches the driver as tasks going from scheduled straight to finished,
while every worker is busy. So an answer counts a worker as running one more task of its
last group (else of the first group with scheduled tasks) when it ended a task less than
``BUSY_GAP_S`` before the answer and tasks are still scheduled: one taken from the scheduled
count of that group, never a task id (which is not known yet).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from nbdist import events as ev
from nbdist.backends.base import current
from nbdist.events import tracing
from nbdist.ids import hex_id

PENDING, SCHEDULED, RUNNING, FINISHED, FAILED = range(5)
STATE_NAMES = ("pending", "scheduled", "running", "finished", "failed")
SPANS = 20
# A worker that ended a task this recently, with tasks still scheduled, is running the next
# (several notice periods of the node, and the driver's turns to read them).
BUSY_GAP_S = 0.25
# The kinds folded here; the rest of the stream does not concern it.
KINDS = ("task_submitted", "task_started", "task_finished", "task_failed", "task_retried",
         "object_created", "object_freed", "object_spilled", "object_restored")

Key = tuple[str, "str | None"]


def _int(hex_text: str) -> int:
    return int(hex_text, 16)


class Tally:
    """See the module docstring."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._queue: ev.PullQueue | None = None
        self._drained_at = 0.0
        self._replay = ev.Replay()  # records folded when following began
        self._after: Any = None  # the last record of an earlier driver: fold only newer ones
        self._news_since = 0.0  # see `events.TaskSummary.news_since`
        # One handler per record class, called with the record's fields (ids as ints).
        self._handlers: dict[type[ev.Event], Callable[..., None]] = {
            ev.TaskSubmitted: self._submitted, ev.TaskStarted: self._started,
            ev.TaskFinished: self._finished, ev.TaskFailed: self._failed,
            ev.TaskRetried: self._retried, ev.ObjectCreated: self._created,
            ev.ObjectFreed: self._freed, ev.ObjectSpilled: self._spilled,
            ev.ObjectRestored: self._restored}
        self._clear()

    def _clear(self) -> None:
        self.tasks: dict[int, tuple] = {}
        self.groups: dict[Key, list[int]] = {}
        self.order: list[Key] = []
        self.marks: dict[Key, tuple[str, str, str, str]] = {}  # a library's groups: its mark
        self.deps = ev.DepFold()
        self.objects: dict[int, tuple[str, int, bool, bool]] = {}
        self.workers: dict[tuple[str, int], list[Any]] = {}
        self.nodes: dict[str, list[int]] = {}
        self.spilled: set[int] = set()  # live objects on a node's disk now
        self.freed = 0

    # ------------------------------------------------------------ following the stream
    def reset(self) -> None:
        """A new driver: forget everything, and the records before now."""
        history = ev.bus().recent(raw=True)
        with self.lock:
            self._clear()
            self._after = history[-1] if history else None
            self._replay = ev.Replay()

    def start(self) -> None:
        """Follow the stream (from the records the history keeps), if not yet following."""
        if self._queue is not None:
            return
        with self.lock:
            if self._queue is None:
                self._queue = ev.bus().pull(KINDS, self._tick)
                self._replay_history()

    def _replay_history(self) -> None:
        """Fold the history (the records after an earlier driver's); those also queued are
        recognised by identity when taken from the queue."""
        history = ev.bus().recent(raw=True)
        if self._after is not None:
            newer = [i for i, item in enumerate(history) if item is self._after]
            history = history[newer[-1] + 1:] if newer else history
        self._replay = ev.Replay(history)
        self._fold(history)
        self._drained_at = time.time()

    def _tick(self) -> None:
        """The event dispatcher's turn: fold what was queued since, so an answer has little
        left to fold."""
        with self.lock:
            self._drain()

    def _drain(self) -> None:
        """Fold what the queue holds (under ``lock``)."""
        queue = self._queue
        assert queue is not None
        now = time.time()
        items = queue.take()
        if queue.overflowed:  # records were lost: start again from what the history keeps
            queue.overflowed = False
            self._clear()
            self._replay_history()
            return
        items = self._replay.fresh(items)
        if items and not self._news_since:
            self._news_since = self._drained_at  # they were published after the last drain
        self._drained_at = now
        self._fold(items)

    def fold(self, items: Iterable[Any]) -> None:
        """Fold records in as a raw subscriber gets them."""
        with self.lock:
            self._fold(items)

    def _fold(self, items: Iterable[Any]) -> None:
        handlers, fields = self._handlers, ev.fields
        for item in items:
            try:
                cls, values = fields(item)
                handler = handlers.get(cls)
                if handler is not None:
                    handler(*values)
            except (ValueError, KeyError):
                continue  # ids that are not ours (hand-made records), or not a record

    # ------------------------------------------------------------ answers
    def summary(self) -> ev.TaskSummary:
        """As of the call: the records published before it are all folded in."""
        self.start()
        now = time.time()
        with self.lock:
            self._drain()
        return self.snapshot(now)

    def snapshot(self, now: float) -> ev.TaskSummary:
        """What is folded in so far, as a record stamped ``now``."""
        with self.lock:
            index = {key: i for i, key in enumerate(self.order)}
            counts = {key: list(self.groups[key]) for key in self.order}
            running = {node: c[0] for node, c in self.nodes.items()}
            names = self._unreported_running(now, counts, running)
            groups = tuple((key[0], key[1], c[0], c[1], c[2], c[3], c[4])
                           for key, c in counts.items())
            edges = tuple((index[a], index[b], n) for (a, b), n in self.deps.edges.items())
            workers = tuple(
                (node, pid, hex_id(w[0]) if w[0] else None, w[1] or names.get((node, pid)),
                 w[2], round(w[3], 3),
                 tuple((hex_id(s[0]), s[1], s[2], s[3], s[4]) for s in w[4]))
                for (node, pid), w in self.workers.items())
            nodes = tuple((node, running[node], c[1], c[2], c[3])
                          for node, c in self.nodes.items())
            news, self._news_since = self._news_since, 0.0
            marks = tuple((index[key], mark) for key, mark in self.marks.items())
            return ev.TaskSummary(now, groups, edges, workers, nodes, self.freed, news, marks)

    def _unreported_running(self, now: float, counts: dict[Key, list[int]],
                            running: dict[str, int]) -> dict[tuple[str, int], str]:
        """Move the tasks presumed running (see the module docstring) from scheduled to
        running in ``counts`` and ``running`` (per node); returns the names they run, by
        worker."""
        names: dict[tuple[str, int], str] = {}
        for (node, pid), w in self.workers.items():
            if w[0] or not w[4] or abs(now - w[4][-1][3]) > BUSY_GAP_S:
                continue
            key = w[5] if w[5] in counts and counts[w[5]][SCHEDULED] > 0 else next(
                (k for k, c in counts.items() if c[SCHEDULED] > 0), None)
            if key is None:
                break  # nothing left to take
            counts[key][SCHEDULED] -= 1
            counts[key][RUNNING] += 1
            running[node] = running.get(node, 0) + 1
            names[node, pid] = key[0]
        return names

    def object_info(self, object_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        self.start()
        with self.lock:
            self._drain()
        return self.lookup(object_ids)

    def lookup(self, object_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """What is folded in so far about these objects (see `events.object_info`)."""
        out: dict[str, dict[str, Any]] = {}
        with self.lock:
            for text in object_ids:
                try:
                    oid = _int(text)
                except ValueError:
                    continue
                made = self.deps.producer.get(oid)
                info: dict[str, Any] = {"task": made[1][0]} if made is not None else {}
                obj = self.objects.get(oid)
                if obj is not None:
                    info["state"] = "failed" if obj[3] else "finished"
                    if not obj[3]:
                        info.update(size=obj[1], node=obj[0])
                        if oid in self.spilled:
                            info["spilled"] = True
                elif made is not None:
                    task = self.tasks.get(made[0])
                    if task is None:
                        continue  # ended, and its result is not known here
                    info["state"] = STATE_NAMES[task[1]]
                    if task[1] == RUNNING:
                        info["node"] = task[3]
                else:
                    continue
                out[text] = info
        return out

    def ref_counts(self, object_ids: Iterable[str]) -> dict[str, int]:
        """How many refs the driver holds to these objects (see `events.ref_counts`)."""
        client = current.client
        if client is None or client.closed:
            return {}
        out = {}
        for text in object_ids:
            try:
                out[text] = int(client.ref_count(_int(text)))
            except ValueError:
                continue
        return out

    # ------------------------------------------------------------ folding (under lock)
    # Each takes its record's fields in order, ids as ints (`events.fields`).
    def _submitted(self, t: float, task_id: int, name: str, deps: Iterable[int],
                   returns: Iterable[int], parent: int | None = None, actor: int | None = None,
                   tag: str | None = None, mark: tuple[str, str, str, str] | None = None
                   ) -> None:
        if task_id in self.tasks:
            return
        key = (name, tag)
        counts = self.groups.get(key)
        if counts is None:
            counts = self.groups[key] = [0, 0, 0, 0, 0]
            self.order.append(key)
            if mark is not None:  # a group is its first call's: a library's calls or not
                self.marks[key] = mark
        missing = self.deps.submitted(task_id, key, deps, returns,
                                      self.objects.__contains__)[0]
        state = PENDING if missing else SCHEDULED
        counts[state] += 1
        self.tasks[task_id] = (key, state, missing, "", 0, returns)

    def _started(self, t: float, task_id: int, name: str, node: str, pid: int) -> None:
        task = self.tasks.get(task_id)
        if task is None or task[1] == RUNNING:
            return
        counts = self.groups[task[0]]
        counts[task[1]] -= 1
        counts[RUNNING] += 1
        self.tasks[task_id] = (task[0], RUNNING, 0, node, pid, task[5])
        worker = self._worker(node, pid)
        worker[0], worker[1] = task_id, name
        self._node(node)[0] += 1

    def _finished(self, t: float, task_id: int, name: str, duration: float, node: str,
                  pid: int, started: float = 0.0) -> None:
        self._ended(task_id, name, node, pid, started or t - duration, duration, FINISHED)

    def _ended(self, task_id: int, name: str, node: str, pid: int, started: float,
               duration: float, final: int) -> Iterable[int]:
        """The task ends in state ``final``; returns the ids of its returns (none if unknown)."""
        task = self.tasks.pop(task_id, None)
        if task is None:
            return ()
        key, state, _, ran_on, ran_by, made = task
        counts = self.groups[key]
        counts[state] -= 1
        counts[final] += 1
        if state == RUNNING:
            self._node(ran_on)[0] -= 1
            node, pid = ran_on, ran_by
        if node and pid:
            worker = self._worker(node, pid)
            if worker[0] == task_id:
                worker[0], worker[1] = 0, None
            worker[2] += 1
            worker[3] += duration
            worker[4].append((task_id, name, round(started, 3), round(started + duration, 3),
                              final == FAILED))
            worker[5] = key
        return made

    def _failed(self, t: float, task_id: int, name: str, error_type: str, message: str,
                duration: float, pid: int, started: float = 0.0, *_: Any) -> None:
        started = started or t - duration
        for oid in self._ended(task_id, name, "", pid, started, duration, FAILED):
            if oid not in self.objects:
                # It holds the error: for the tasks that take it, it is there.
                self.objects[oid] = ("", 0, False, True)
                self._ready(oid)

    def _retried(self, t: float, task_id: int, name: str, attempt: int, reason: str) -> None:
        task = self.tasks.get(task_id)
        if task is None:
            return
        key, state, _, node, pid, made = task
        if state == RUNNING:
            self._node(node)[0] -= 1
            worker = self.workers.get((node, pid))
            if worker is not None and worker[0] == task_id:
                worker[0], worker[1] = 0, None
        counts = self.groups[key]
        counts[state] -= 1
        counts[SCHEDULED] += 1
        self.tasks[task_id] = (key, SCHEDULED, 0, "", 0, made)

    def _created(self, t: float, oid: int, size: int, node: str, owner: int,
                 task_id: int | None, in_shm: bool) -> None:
        if oid in self.objects:
            return
        self.objects[oid] = (node, size, in_shm, False)
        counts = self._node(node)
        counts[1] += 1
        counts[2] += size
        if in_shm:
            counts[3] += size
        self._ready(oid)

    def _freed(self, t: float, oid: int, size: int = 0, node: str = "") -> None:
        self.deps.freed(oid)
        self.spilled.discard(oid)
        obj = self.objects.pop(oid, None)
        if obj is None or obj[3]:
            return
        self.freed += 1
        counts = self._node(obj[0])
        counts[1] -= 1
        counts[2] -= obj[1]
        if obj[2]:
            counts[3] -= obj[1]

    def _spilled(self, t: float, oid: int, size: int, node: str) -> None:
        obj = self.objects.get(oid)
        if obj is not None and obj[2] and oid not in self.spilled:
            self.spilled.add(oid)
            self.objects[oid] = (obj[0], obj[1], False, obj[3])
            self._node(obj[0])[3] -= obj[1]

    def _restored(self, t: float, oid: int, size: int, node: str) -> None:
        obj = self.objects.get(oid)
        if obj is not None and oid in self.spilled:
            self.spilled.discard(oid)
            self.objects[oid] = (obj[0], obj[1], True, obj[3])
            self._node(obj[0])[3] += obj[1]

    def _ready(self, oid: int) -> None:
        for task_id in self.deps.ready(oid):
            task = self.tasks.get(task_id)
            if task is None or task[1] != PENDING:
                continue
            if task[2] > 1:
                self.tasks[task_id] = (task[0], PENDING, task[2] - 1, *task[3:])
            else:
                counts = self.groups[task[0]]
                counts[PENDING] -= 1
                counts[SCHEDULED] += 1
                self.tasks[task_id] = (task[0], SCHEDULED, 0, *task[3:])

    def _worker(self, node: str, pid: int) -> list[Any]:
        worker = self.workers.get((node, pid))
        if worker is None:
            worker = self.workers[node, pid] = [0, None, 0, 0.0,
                                                collections.deque(maxlen=SPANS), None]
        return worker

    def _node(self, node: str) -> list[int]:
        counts = self.nodes.get(node)
        if counts is None:
            counts = self.nodes[node] = [0, 0, 0, 0]
        return counts


_tally = Tally()
# What `nbdist.events` answers of the engine's folds: the tally's, and the timeline's.
ev.set_summary_source(_tally)
ev.set_timeline_source(tracing.SOURCE)


def reset() -> None:
    """A new driver joined a cluster: its ids start over (called by the runtime)."""
    _tally.reset()

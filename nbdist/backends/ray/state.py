"""Task state, placement and workers from Ray's task events, polled at a bounded rate.

Ray's workers report each task's state changes (with node, worker pid and timestamps) to the
GCS about once a second (``RAY_task_events_report_interval_ms``, default 1000). `StatePoller`
reads them there on its own thread, at most once every ``POLL_INTERVAL_S`` (less often when a poll
takes long: see ``MAX_POLL_SHARE``), and only while this driver has tasks it has not seen end,
so an idle session costs nothing. Each poll turns what
changed for this job's known tasks into events:

    RUNNING                         TaskStarted (node id, worker pid); WorkerUp the first time
                                    a (node, pid) pair shows up
    FINISHED                        TaskFinished (run time from Ray's own timestamps)
    FAILED                          TaskFailed (the user's exception type when it was a task
                                    error, else Ray's error kind)
    attempt_number > 0              TaskRetried

"Known" tasks are those the driver submitted and the nested ones workers reported through the
output sink; a poll leaves others for later, so a state never precedes its TaskSubmitted.

The reader is the GCS's task-event table as Ray's own ``ray.timeline()`` reads it when no
dashboard runs (``ray.util.state`` needs the dashboard, which nbdist does not start). It is
the one place where nbdist reads Ray internals; if it is unavailable (Ray Client sessions, a
future Ray) the poller logs once and stops, and the panel shows submitted tasks as pending.
The whole table is read on each poll (Ray keeps up to 100,000 task attempts); records of
ended tasks and of other jobs are parsed once and then recognised by their hash, so a poll's
cost follows what changed, not the table's size.
"""

from __future__ import annotations

import collections
import importlib
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from nbdist import events as ev

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 1.0
# A poll reads the whole table: with many tasks in it, the gap after a poll grows so that
# polling (the GCS's answer included) takes at most this share of the time. Reading every
# second whatever it cost, with tens of thousands of tasks in the table, took a quarter of
# the actor calls a driver made per second on 2 cores (0.51–0.60 of Ray against 0.68–0.81).
MAX_POLL_SHARE = 0.1
MAX_POLL_GAP_S = 5.0  # but a task's end still shows within seconds (util.state, the panel)
PID_GRACE_S = 5.0  # how long an ended task waits for its worker's own report (node, pid)
MAX_ENDED = 200_000
_TASK_ERROR_RE = re.compile(r"(\w+) in task '")
# Ray's error kinds, named by the exception a `get` raises for them (the name nbdist's own
# engine records), when the record's message does not name the user's exception.
_ERROR_NAMES = {
    "TASK_CANCELLED": "TaskCancelledError",
    "WORKER_DIED": "WorkerCrashedError",
    "ACTOR_DIED": "ActorDiedError",
    "OUT_OF_MEMORY": "OutOfMemoryError",
}


class StatePoller:
    """Folds Ray's task events of one job into nbdist events (see the module docstring)."""

    def __init__(self, job_hex: str, publish: Callable[[ev.Event], None],
                 on_end: Callable[[str], None]) -> None:
        self.job = bytes.fromhex(job_hex)
        self.publish = publish
        self.on_end = on_end
        self.unfinished: dict[str, str] = {}  # task id -> name, until it is seen to end
        self._lock = threading.Lock()
        self._started: set[tuple[str, int]] = set()
        self._ended: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._workers: set[tuple[str, int]] = set()
        self._failed: set[str] = set()
        self._no_pid_since: dict[str, float] = {}
        self._settled: set[int] = set()  # hashes of records with nothing more to tell
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nbdist-ray-state",
                                        daemon=True)
        self._read: Callable[[], list[bytes]] | None = None

    def track(self, task_hex: str, name: str) -> None:
        with self._lock:
            self.unfinished[task_hex] = name

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(POLL_INTERVAL_S * 5)

    def _run(self) -> None:
        gap = POLL_INTERVAL_S
        try:
            self._reader()
        except Exception:
            log.warning("nbdist: Ray's task events cannot be read here; the panel shows "
                        "submitted tasks as pending", exc_info=True)
            return
        warned = False
        while not self._stop.wait(gap):
            if not self.unfinished:
                continue
            began = time.monotonic()
            try:
                self.poll()
            except Exception:
                # A read can fail for a while (the GCS busy on a loaded machine): the next poll
                # reads the whole table again, so nothing is lost by trying later.
                if self._stop.is_set():
                    return
                if not warned:
                    warned = True
                    log.warning("nbdist: reading Ray's task events failed; trying again "
                                "every %s s", MAX_POLL_GAP_S, exc_info=True)
                gap = MAX_POLL_GAP_S
                continue
            took = time.monotonic() - began
            gap = min(MAX_POLL_GAP_S, max(POLL_INTERVAL_S, took / MAX_POLL_SHARE))

    def _reader(self) -> Callable[[], list[bytes]]:
        if self._read is None:
            import ray._private.state as ray_state

            accessor = ray_state.state._connect_and_get_accessor()
            self._read = accessor.get_task_events
        return self._read

    def poll(self) -> None:
        """Read the task-event table once and publish what changed."""
        gcs_pb2 = _proto("gcs_pb2")
        latest: dict[str, Any] = {}
        settled = self._settled
        if len(settled) > MAX_ENDED:
            settled.clear()
        for blob in self._reader()():
            # A record that said nothing new last time is skipped unparsed: the table keeps
            # every ended task, and parsing them all again each second cost more driver CPU
            # than the tasks' own submission.
            key = hash(blob)
            if key in settled:
                continue
            record = gcs_pb2.TaskEvents.FromString(blob)
            if record.job_id != self.job:
                settled.add(key)
                continue
            task_hex = record.task_id.hex()
            if task_hex in self._ended:
                settled.add(key)
                continue
            if task_hex not in self.unfinished:
                continue
            seen = latest.get(task_hex)
            if seen is None or seen.attempt_number < record.attempt_number:
                latest[task_hex] = record
        failed_before, self._failed = self._failed, set()
        for task_hex, record in latest.items():
            self._apply(task_hex, record, failed_before)

    def _apply(self, task_hex: str, record: Any, failed_before: set[str]) -> None:
        status = _proto("common_pb2").TaskStatus
        upd = record.state_updates
        ts = upd.state_ts_ns
        name = self.unfinished.get(task_hex) or record.task_info.name or "?"
        node = upd.node_id.hex()
        pid = int(upd.worker_pid)
        attempt = int(record.attempt_number)
        key = (task_hex, attempt)
        running = ts.get(status.Value("RUNNING"))
        finished = ts.get(status.Value("FINISHED"))
        failed = ts.get(status.Value("FAILED"))
        if (finished or failed) and not pid and (running or finished):
            # The caller's report of the end can reach the table before the executing
            # worker's report of the run (each process reports about once a second): give
            # the worker's report a few polls, so the task is placed on its worker. The grace
            # counts once per task (until it ends): a failure still needs a second poll to be
            # final, and a worker's report may never come (a worker that ended first).
            since = self._no_pid_since.setdefault(task_hex, time.monotonic())
            if time.monotonic() - since < PID_GRACE_S:
                return
        if not running and finished:
            running = finished  # it ran between two of the worker's reports
        # Ray's reports can name the running state before the worker's pid: wait for the pid
        # (or the end) so the panel places the task on its worker.
        if running and key not in self._started and (pid or finished or failed):
            self._started.add(key)
            if attempt > 0:
                self.publish(ev.TaskRetried(running / 1e9, task_hex, name, attempt,
                                            "retried by Ray"))
            if (node, pid) not in self._workers:
                self._workers.add((node, pid))
                self.publish(ev.WorkerUp(running / 1e9, node, pid))
            self.publish(ev.TaskStarted(running / 1e9, task_hex, name, node, pid))
        if not (finished or failed):
            return
        if failed and not finished and task_hex not in failed_before:
            # Ray may still retry it: a failure is final once no new attempt showed up by
            # the next poll.
            self._failed.add(task_hex)
            return
        end = finished or failed
        duration = (end - running) / 1e9 if running else 0.0
        if finished:
            self.publish(ev.TaskFinished(end / 1e9, task_hex, name, duration, node, pid))
        else:
            etype, message = _error_summary(upd.error_info)
            self.publish(ev.TaskFailed(end / 1e9, task_hex, name, etype, message, duration,
                                       pid))
        self._end(task_hex, attempt)

    def _end(self, task_hex: str, attempt: int) -> None:
        with self._lock:
            self.unfinished.pop(task_hex, None)
        self._no_pid_since.pop(task_hex, None)
        self.on_end(task_hex)
        for n in range(attempt + 1):
            self._started.discard((task_hex, n))
        self._ended[task_hex] = None
        while len(self._ended) > MAX_ENDED:
            self._ended.popitem(last=False)


def _proto(name: str) -> Any:
    return importlib.import_module(f"ray.core.generated.{name}")


def _error_summary(info: Any) -> tuple[str, str]:
    """(exception type, first line of the message) of a failed task's Ray error info."""
    common_pb2 = _proto("common_pb2")
    text = str(info.error_message or "")
    m = _TASK_ERROR_RE.search(text)
    if m is not None:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        return m.group(1), lines[-1].split(": ", 1)[-1] if lines else ""
    kind = common_pb2.ErrorType.Name(info.error_type) if info.error_type else "Error"
    kind = _ERROR_NAMES.get(kind, kind)
    first = text.strip().splitlines()[0] if text.strip() else ""
    return kind, first

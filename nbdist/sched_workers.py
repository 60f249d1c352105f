"""NodeState's worker processes (see `nbdist.scheduler`): one started, one lost (its task
retried or failed, its actor restarted), idle extra workers stopped. Plain functions taking the
state, bound as NodeState methods in its class body.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from . import protocol as P
from .sched_records import Worker

if TYPE_CHECKING:
    from .scheduler import NodeState


def worker_started(self: NodeState, worker: Worker) -> None:
    self.workers[worker.pid] = worker
    self.idle.append(worker)
    self.need_dispatch = True


def worker_lost(self: NodeState, worker: Worker, exit_code: int | None) -> None:
    if worker.state == "dead":
        return
    worker.state = "dead"
    self.workers.pop(worker.pid, None)
    how = _exit_text(exit_code)
    task = worker.task
    worker.task = None
    if task is not None and not task.finished:
        self._worker_free(worker, task)
        worker.state = "dead"
        name = task.spec[P.S_NAME]
        self._lost_run(
            task, " (its worker was stopped)", f"worker pid={worker.pid} {how}",
            f"The worker (pid={worker.pid}) running task {name!r} {how}; no retries left "
            f"(max_retries={task.spec[P.S_MAX_RETRIES]}). If the process ran out of "
            "memory, lower the memory the task uses or give it more resources.")
    if worker.actor is not None:
        self._actor_worker_lost(worker.actor, worker, how)
    for job in self.jobs:
        self._event(job, "worker_down", {"pid": worker.pid, "reason": how})
    self.need_dispatch = True


def _reap_idle(self: NodeState) -> None:
    if len(self.workers) <= self.num_cpus:
        return
    now = time.monotonic()
    extra = len(self.workers) - self.num_cpus
    for w in list(self.workers.values()):
        if extra <= 0:
            break
        if w.state == "idle" and now - w.idle_since > 10.0:
            w.state = "dead"
            self.workers.pop(w.pid, None)
            self.io.kill_worker(w, graceful=True)
            extra -= 1


def _exit_text(code: int | None) -> str:
    if code is None:
        return "exited unexpectedly"
    if code < 0:
        import signal

        try:
            sig = signal.Signals(-code).name
        except ValueError:
            sig = str(-code)
        extra = " (killed: likely out of memory or stopped by a signal)" if sig == "SIGKILL" else ""
        return f"was killed by {sig}{extra}"
    return f"exited with code {code}"

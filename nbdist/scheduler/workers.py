"""The worker pool: the node's worker processes and which of them are free (layer L1).

Owns ``workers`` (pid -> `Worker`, every live process) and ``idle`` (a stack of workers
that were idle when pushed: a worker popped from it is used only if still idle, so it needs
no removal when it goes busy, becomes an actor's or dies).

Sizing: one task worker per CPU; more (up to ``num_cpus + max_extra_workers``) only while
workers are blocked in `get` (their CPU lent back) or tasks with ``num_cpus=0`` want one.
Extra workers idle for longer than ``IDLE_EXTRA_S`` are stopped. A process is started through
`NodeIO.spawn_worker`, which reports it back through `started`.

Runtime environments: a worker that ran a task with a runtime_env (``extra["runtime_env"]``,
see `nbdist.driver.runtime_env`) keeps it for life (``Worker.env``, its key) and takes only
tasks with the same key; a worker with none takes any task, and is bound by the first one with
a key. When every idle worker is bound to another key and no more may start, one of them is
stopped for a new one. Until the first task with a key, the pool is the plain stack below.

GPUs: as Ray keeps them apart, a worker that ran a task needing GPUs takes only such tasks,
and one that ran a task without takes only those (``gpu``, pid -> kind, kept from the first
task with a key or GPUs on; a worker that ran tasks before that is a CPU one). A node
without GPUs never gets there, so its pool stays the plain stack.

State changes (`states`): idle -> busy -> idle per task, idle -> actor for a process started
for an actor, any -> dead once (a second loss report of the same worker is ignored).
"""

from __future__ import annotations

import signal
import time

from nbdist.scheduler.records import NodeIO, Task, Worker

IDLE_EXTRA_S = 10.0


class WorkerPool:
    def __init__(self, io: NodeIO, num_cpus: int, max_extra_workers: int) -> None:
        self.io = io
        self.num_cpus = num_cpus
        self.max_workers = num_cpus + max_extra_workers
        self.workers: dict[int, Worker] = {}
        self.idle: list[Worker] = []
        self.envs = False  # a task with a runtime_env or GPUs was seen: match workers by key
        self.gpu: dict[int, bool] = {}  # pid -> whether its first task here needed GPUs

    def __len__(self) -> int:
        return len(self.workers)

    def started(self, worker: Worker) -> None:
        self.workers[worker.pid] = worker
        self.idle.append(worker)

    def take_idle(self, env: str = "", gpu: bool = False) -> Worker | None:
        """An idle task worker for a task with runtime_env key ``env`` (``gpu``: one that
        needs GPUs), started now if the limits allow; None if none may be."""
        if env or gpu or self.envs:
            return self._take_for(env, gpu)
        while self.idle:
            w = self.idle.pop()
            if w.state == "idle":
                return w
        active = sum(1 for w in self.workers.values()
                     if w.state in ("idle", "busy") and not w.blocked)
        if active >= self.num_cpus + 1 and len(self.workers) >= self.num_cpus:
            # Enough task workers for the CPUs (tasks with num_cpus=0 share them).
            if active >= self.max_workers:
                return None
        if len(self.workers) >= self.max_workers:
            return None
        return self.io.spawn_worker()

    def _take_for(self, env: str, gpu: bool) -> Worker | None:
        self.envs = True
        kinds = self.gpu
        self.idle = idle = [w for w in self.idle if w.state == "idle"]
        # A worker's GPU kind: bound by the first task it took here, or (before any task
        # with a runtime_env or GPUs) a plain CPU worker if it ran anything at all.
        fit = [i for i in range(len(idle) - 1, -1, -1)
               if kinds.get(idle[i].pid, False if idle[i].fns else None) in (None, gpu)]
        pick = next((i for i in fit if idle[i].env == env), None)
        if pick is None and env:
            pick = next((i for i in fit if not idle[i].env), None)
        if pick is not None:
            worker: Worker | None = idle.pop(pick)
        else:
            worker = self._spawn() if self._may_spawn() else None
            if worker is None and idle and len(self.workers) >= self.max_workers:
                other = idle.pop(0)  # the longest idle, bound to another runtime_env
                self._stop(other)
                worker = self._spawn()
        if worker is not None:
            worker.env = env
            kinds[worker.pid] = gpu
        return worker

    def _may_spawn(self) -> bool:
        active = sum(1 for w in self.workers.values()
                     if w.state in ("idle", "busy") and not w.blocked)
        if active >= self.num_cpus + 1 and len(self.workers) >= self.num_cpus:
            if active >= self.max_workers:
                return False
        return len(self.workers) < self.max_workers

    def _spawn(self) -> Worker | None:
        worker = self.io.spawn_worker()
        if worker is not None and self.idle and self.idle[-1] is worker:
            self.idle.pop()  # reported idle by `started`; it is taken now
        return worker

    def run(self, worker: Worker, task: Task) -> None:
        worker.to("busy")
        worker.task = task

    def done(self, worker: Worker) -> None:
        """``worker``'s task ended: back to idle (a worker already lost stays dead)."""
        if worker.state == "busy":
            worker.to("idle")
            worker.idle_since = time.monotonic()
            self.idle.append(worker)

    def lost(self, worker: Worker) -> bool:
        """``worker``'s process is gone; False if that was known already."""
        if worker.state == "dead":
            return False
        worker.to("dead")
        self.workers.pop(worker.pid, None)
        self.gpu.pop(worker.pid, None)
        return True

    def reap_idle(self) -> None:
        """Stop extra workers idle for longer than IDLE_EXTRA_S."""
        if len(self.workers) <= self.num_cpus:
            return
        now = time.monotonic()
        extra = len(self.workers) - self.num_cpus
        for w in list(self.workers.values()):
            if extra <= 0:
                break
            if w.state == "idle" and now - w.idle_since > IDLE_EXTRA_S:
                self._stop(w)
                extra -= 1

    def _stop(self, worker: Worker) -> None:
        worker.to("dead")
        self.workers.pop(worker.pid, None)
        self.gpu.pop(worker.pid, None)
        self.io.kill_worker(worker, graceful=True)


def exit_text(code: int | None) -> str:
    """How a worker process ended, for error messages and events."""
    if code is None:
        return "exited unexpectedly"
    if code < 0:
        try:
            sig = signal.Signals(-code).name
        except ValueError:
            sig = str(-code)
        extra = " (killed: likely out of memory or stopped by a signal)" if sig == "SIGKILL" else ""
        return f"was killed by {sig}{extra}"
    return f"exited with code {code}"

"""Memory protection: the node daemon keeps its machine out of swap and out of the kernel's
OOM killer by killing one task's worker itself (layer L2).

Every ``memory_monitor_refresh_ms`` (Ray's default 250; 0 turns the monitor off) the node reads
how much memory is in use, where the node runs:

    in a cgroup with a memory limit   memory.current - inactive_file of memory.stat (v2), or
                                      memory.usage_in_bytes - total_inactive_file (v1), of the
                                      limit
    otherwise                         MemTotal - MemAvailable of /proc/meminfo, of MemTotal

Past ``memory_usage_threshold`` of the total (Ray's default 0.95; ``NBDIST_MEMORY_USAGE_
THRESHOLD`` or ``init(memory_usage_threshold=...)``) it kills (SIGKILL) the worker of the most
recently started task that may be retried (``max_retries`` left), or, if none may, of the most
recently started task: the newest work has lost the least. The task then runs again as any task
whose worker died, and when its retries are used up ``get`` raises `OutOfMemoryError`. One
worker at a time: no other is killed until the last one killed is gone (or KILL_WAIT_S passed)
and the memory it held shows as free: the kernel's counts trail an exit (per-CPU counters folded
in every ``vm.stat_interval``, 1 s by default), so after a kill the next decision waits until the
measure falls back under the threshold, or SETTLE_S passes. Actors are left alone (their state
would be lost), and so are workers still connecting (forked for a task, still in their
handshake: the task has not started and they hold nothing yet).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable

from nbdist.scheduler import Worker
from nbdist.wire import protocol as P

log = logging.getLogger(__name__)

CGROUP = "/sys/fs/cgroup"
KILL_WAIT_S = 5.0  # a killed worker not reported gone by then no longer holds the next kill
SETTLE_S = 1.0  # after it is gone, how long its freed memory may take to show in the measure


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _stat_value(path: str, key: str) -> int:
    try:
        with open(path) as f:
            for line in f:
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _cgroup_usage(root: str) -> tuple[int, int] | None:
    limit = _read_int(os.path.join(root, "memory.max"))
    if limit is not None:
        used = _read_int(os.path.join(root, "memory.current")) or 0
        return used - _stat_value(os.path.join(root, "memory.stat"), "inactive_file"), limit
    v1 = os.path.join(root, "memory")
    limit = _read_int(os.path.join(v1, "memory.limit_in_bytes"))
    if limit is not None and limit < 1 << 60:  # v1 says "no limit" with a huge number
        used = _read_int(os.path.join(v1, "memory.usage_in_bytes")) or 0
        return used - _stat_value(os.path.join(v1, "memory.stat"), "total_inactive_file"), limit
    return None


def _meminfo() -> tuple[int, int]:
    values: dict[str, int] = {}
    with open("/proc/meminfo") as f:
        for line in f:
            name, _, rest = line.partition(":")
            parts = rest.split()
            if parts:
                values[name] = int(parts[0]) * 1024
    total = values.get("MemTotal", 0)
    return total - values.get("MemAvailable", values.get("MemFree", 0)), total


def memory_usage(cgroup_root: str = CGROUP) -> tuple[int, int]:
    """(bytes in use, bytes there are) where this process runs."""
    usage = _cgroup_usage(cgroup_root)
    machine = _meminfo()
    if usage is None or usage[1] >= machine[1]:  # a limit above the machine's RAM is none
        return machine
    return max(0, usage[0]), usage[1]


def pick_victim(workers: Iterable[Worker]) -> Worker | None:
    """The worker of the most recently started retriable task, else of the most recently
    started task; None when no task runs (actors are never picked)."""
    best: tuple[bool, float] | None = None
    victim = None
    for worker in workers:
        task = worker.task
        client = worker.client
        if (worker.state != "busy" or worker.actor is not None or task is None or task.finished
                or client is None or (client.peer is not None and not client.peer.authed)):
            continue  # not connected yet (its task waits for the handshake): it used nothing
        rank = (task.retries_left > 0, task.dispatched_at)
        if best is None or rank > best:
            best, victim = rank, worker
    return victim


class MemoryMonitor:
    """The decision of when to kill which worker; the node does the killing."""

    def __init__(self, threshold: float, refresh_ms: int) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"memory_usage_threshold must be in (0, 1], not {threshold}")
        self.threshold = threshold
        self.interval = refresh_ms / 1000.0
        self.killing: Worker | None = None  # killed, not yet reported gone
        self.gone_at = 0.0  # when the last one killed was gone, until the measure shows it
        self.killed_at = 0.0
        self.kills = 0

    @property
    def enabled(self) -> bool:
        return self.interval > 0

    def check(self, workers: Iterable[Worker]) -> tuple[Worker, str] | None:
        """The worker to kill now and why, if memory is past the threshold."""
        now = time.monotonic()
        if self.killing is not None:
            if self.killing.state != "dead" and now - self.killed_at < KILL_WAIT_S:
                return None
            self.killing = None
            self.gone_at = now
        used, total = memory_usage()
        over = bool(total) and used > self.threshold * total
        if self.gone_at:
            if over and now - self.gone_at < SETTLE_S:
                return None  # the memory of the one killed may not show as free yet
            self.gone_at = 0.0
        if not over:
            return None
        victim = pick_victim(workers)
        if victim is None:
            return None
        assert victim.task is not None
        self.killing = victim
        self.killed_at = time.monotonic()
        self.kills += 1
        reason = (
            f"the node's memory use {used / 2**30:.2f} GiB of {total / 2**30:.2f} GiB "
            f"({used / total:.0%}) was past memory_usage_threshold={self.threshold:g}, so the "
            f"worker (pid={victim.pid}) of task {victim.task.spec[P.S_NAME]!r}, the most "
            "recently started one (retriable tasks first), was killed")
        log.warning("nbdist node: %s", reason)
        return victim, reason

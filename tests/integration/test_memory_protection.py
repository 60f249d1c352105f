"""Memory protection: past memory_usage_threshold the node kills the worker of the most
recently started retriable task, which is retried; when its retries are used up, ``get``
raises OutOfMemoryError.

The machine is never exhausted: the threshold is set a little above the memory in use when
the test starts, and the task that crosses it allocates at most ``MARGIN`` beyond the
threshold (it gives up, and the test fails, if nothing stopped it by then). Other processes
on the machine moving their memory only changes how far the task must go.
"""

from __future__ import annotations

import os
import time

import pytest
from polling import poll, until

import nbdist
from nbdist import events, exceptions
from nbdist.daemons.memory_monitor import memory_usage, pick_victim
from nbdist.scheduler import Worker

pytestmark = [pytest.mark.timeout(120), pytest.mark.nbdist_only]

STEP = 32 << 20
HEADROOM = 512 << 20  # the threshold: this much above the memory in use at the start
MARGIN = 1 << 30


@nbdist.remote(max_retries=1)
def hog(threshold: float) -> str:
    """Allocate (and touch) memory until the node kills this process, or give up once the
    machine is MARGIN past the threshold."""
    held = []
    while True:
        used, total = memory_usage()
        if used > threshold * total + MARGIN:
            return f"not killed at {used / total:.3f} of memory in use"
        held.append(b"\x01" * STEP)
        until(lambda: False, timeout=0.01)  # give the node's monitor a turn between steps


@nbdist.remote(max_retries=0)
def steady(path: str) -> int:
    """Runs while the hog grows (started first, and never retriable: never the one killed
    while the hog is retriable or newer); ends once the test removes ``path``."""
    until(lambda: not os.path.exists(path), timeout=100, interval=0.05)
    return os.getpid()


@pytest.fixture
def protected_cluster() -> object:
    if nbdist.is_initialized():
        nbdist.shutdown()
    used, total = memory_usage()
    threshold = (used + HEADROOM) / total
    nbdist.init(num_cpus=2, memory_usage_threshold=threshold, memory_monitor_refresh_ms=50)
    try:
        yield threshold
    finally:
        nbdist.shutdown()


def test_the_newest_retriable_task_is_killed_retried_then_out_of_memory(
        protected_cluster: float, tmp_path: object) -> None:
    threshold = protected_cluster
    gate = os.path.join(str(tmp_path), "gate")
    open(gate, "w").close()
    older = steady.remote(gate)
    poll(lambda: any(isinstance(e, events.TaskStarted) and e.name == "steady"
                     for e in events.recent()), timeout=30, what="steady started")
    with pytest.raises(exceptions.OutOfMemoryError, match="memory_usage_threshold"):
        nbdist.get(hog.remote(threshold), timeout=90)
    retried = [e for e in events.recent() if isinstance(e, events.TaskRetried)]
    assert [e.name for e in retried] == ["hog"], retried
    assert "out of memory" in retried[0].reason
    # The older task was never the one killed: it runs on in its first worker.
    os.unlink(gate)
    started = [e for e in events.recent()
               if isinstance(e, events.TaskStarted) and e.name == "steady"]
    assert nbdist.get(older, timeout=30) == started[0].worker_pid
    # The node serves on.
    assert nbdist.get(steady.remote(gate), timeout=30) > 0


def test_monitor_off_with_refresh_zero() -> None:
    if nbdist.is_initialized():
        nbdist.shutdown()
    used, total = memory_usage()
    nbdist.init(num_cpus=1, memory_usage_threshold=max(0.01, used / total / 2),
                memory_monitor_refresh_ms=0)
    try:
        @nbdist.remote(max_retries=0)
        def small() -> int:
            return len(b"\x01" * STEP)

        # Memory is already past the threshold: only a disabled monitor lets this finish.
        assert nbdist.get(small.remote(), timeout=30) == STEP
    finally:
        nbdist.shutdown()


def test_pick_victim_prefers_the_newest_retriable_task() -> None:
    class FakeTask:
        def __init__(self, retries: int, started: float) -> None:
            self.retries_left = retries
            self.dispatched_at = started
            self.finished = False

    class FakePeer:
        def __init__(self, authed: bool) -> None:
            self.authed = authed

    class FakeClient:
        def __init__(self, authed: bool) -> None:
            self.peer = FakePeer(authed)

    def busy(pid: int, task: FakeTask, authed: bool = True) -> Worker:
        worker = Worker(pid)
        worker.client = FakeClient(authed)  # type: ignore[assignment]
        worker.state = "busy"
        worker.task = task  # type: ignore[assignment]
        return worker

    now = time.time()
    old_retriable = busy(1, FakeTask(1, now - 5))
    new_retriable = busy(2, FakeTask(2, now - 1))
    newest_final = busy(3, FakeTask(0, now))
    assert pick_victim([old_retriable, newest_final, new_retriable]) is new_retriable
    assert pick_victim([newest_final, busy(4, FakeTask(0, now - 9))]) is newest_final
    assert pick_victim([Worker(5)]) is None
    # A worker just forked for a task is still in its handshake: its task has not started and
    # it holds nothing, so it is never the one killed (killed then, it used to go unnoticed).
    handshaking = busy(6, FakeTask(1, now + 1), authed=False)
    assert pick_victim([old_retriable, handshaking]) is old_retriable

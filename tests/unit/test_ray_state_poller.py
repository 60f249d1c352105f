"""The Ray backend's state poller folds Ray's task-event records into nbdist's events.

The records are built with Ray's own message classes, as its GCS table holds them, and fed to
the real `StatePoller` through its table reader: the folding is what is under test, not Ray.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from polling import poll

from nbdist import events as ev
from nbdist.backends.ray import state

JOB = "01000000"
TASK = "ab" * 24


def _record(*, running: bool = False, failed: bool = False, finished: bool = False,
            pid: int = 0, error: str = "") -> bytes:
    from ray.core.generated import common_pb2, gcs_pb2

    status = common_pb2.TaskStatus
    rec = gcs_pb2.TaskEvents(task_id=bytes.fromhex(TASK), attempt_number=0,
                             job_id=bytes.fromhex(JOB))
    rec.task_info.name = "cancelled"
    now = time.time_ns()
    upd = rec.state_updates
    if pid:
        upd.worker_pid = pid
        upd.node_id = b"\x01" * 28
    if running:
        upd.state_ts_ns[status.Value("RUNNING")] = now - 2_000_000_000
    if finished:
        upd.state_ts_ns[status.Value("FINISHED")] = now
    if failed:
        upd.state_ts_ns[status.Value("FAILED")] = now
        upd.error_info.error_message = error
        upd.error_info.error_type = common_pb2.ErrorType.Value("TASK_CANCELLED")
    return bytes(rec.SerializeToString())


class _Table:
    """The poller's view of the GCS table: the records it holds now."""

    def __init__(self) -> None:
        self.records: list[bytes] = []


@pytest.fixture
def poller(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(state, "PID_GRACE_S", 0.3)
    published: list[ev.Event] = []
    ended: list[str] = []
    table = _Table()
    p = state.StatePoller(JOB, published.append, ended.append)
    p._read = lambda: list(table.records)
    p.track(TASK, "cancelled")
    return p, table, published, ended


def _ends(published: list[ev.Event]) -> list[ev.Event]:
    return [e for e in published if isinstance(e, (ev.TaskFinished, ev.TaskFailed))]


def test_a_failed_task_whose_worker_never_reported_is_still_published_failed(poller) -> None:
    p, table, published, ended = poller
    # Only the caller's report reached the table: failed, with no worker pid.
    table.records = [_record(failed=True)]

    def polled() -> list[ev.Event]:
        p.poll()
        return _ends(published)

    done = poll(polled, timeout=30, what="the failure published")
    assert [type(e).__name__ for e in done] == ["TaskFailed"]
    assert ended == [TASK]
    p.poll()
    assert len(_ends(published)) == 1  # once


def test_a_cancelled_running_task_without_its_workers_pid_ends_once(poller) -> None:
    p, table, published, ended = poller
    table.records = [_record(running=True, failed=True)]

    def polled() -> list[ev.Event]:
        p.poll()
        return _ends(published)

    done = poll(polled, timeout=30, what="the end published")
    assert [type(e).__name__ for e in done] == ["TaskFailed"]
    assert done[0].error_type == "TaskCancelledError"  # the error a get raises for it
    assert [type(e).__name__ for e in published].count("TaskStarted") == 1


def test_a_failure_waits_one_more_poll_for_a_retry(poller) -> None:
    p, table, published, ended = poller
    table.records = [_record(running=True, failed=True, pid=4321)]
    p.poll()
    assert not _ends(published)  # Ray may still retry it
    p.poll()
    assert [type(e).__name__ for e in _ends(published)] == ["TaskFailed"]


def test_a_finished_task_is_placed_on_its_worker(poller) -> None:
    p, table, published, ended = poller
    table.records = [_record(running=True, finished=True, pid=4321)]
    p.poll()
    (start,) = [e for e in published if isinstance(e, ev.TaskStarted)]
    (end,) = _ends(published)
    assert isinstance(end, ev.TaskFinished) and start.worker_pid == 4321


def test_a_record_that_names_no_node_does_not_end_the_current_clusters_history() -> None:
    from nbdist.events import tracing

    # Records that name no node only (whether a cluster runs in this process or not).
    ran = ev.TaskFailed(1.0, TASK, "earlier", "ValueError", "", 0.5, 0)
    placed_nowhere = ev.TaskStarted(2.0, "cd" * 24, "cancelled", "", 0)
    ended = ev.TaskFailed(3.0, "cd" * 24, "cancelled", "TaskCancelledError", "", 1.0, 0)
    history = [ran, placed_nowhere, ended]
    assert tracing.current_cluster_history(history) == history

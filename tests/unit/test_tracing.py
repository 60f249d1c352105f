"""The task timeline (nbdist.events.tracing) driven by hand-made event records: no kernel, no cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nbdist import events as ev
from nbdist.events import tracing
from nbdist.events.tracing import TaskTimeline

pytestmark = pytest.mark.timeout(30)

NODE = "0001000000aa"


def started(tid: str, t: float, pid: int = 11, name: str = "f",
            node: str = NODE) -> ev.TaskStarted:
    return ev.TaskStarted(t, tid, name, node, pid)


def finished(tid: str, t: float, duration: float, pid: int = 11, name: str = "f",
             node: str = NODE) -> ev.TaskFinished:
    return ev.TaskFinished(t, tid, name, duration, node, pid)


def failed(tid: str, t: float, duration: float, pid: int = 11,
           name: str = "f") -> ev.TaskFailed:
    return ev.TaskFailed(t, tid, name, "ValueError", "bad value", duration, pid)


def complete(tl: TaskTimeline) -> list[dict]:
    return [e for e in tl.trace_events() if e["ph"] == "X"]


def test_one_complete_event_per_execution_with_times_in_microseconds() -> None:
    tl = TaskTimeline()
    tl.apply([started("t1", 100.0, pid=11), started("t2", 100.5, pid=12),
              finished("t1", 100.3, 0.25, pid=11), finished("t2", 101.2, 0.5, pid=12)])
    events = complete(tl)
    assert [e["args"]["task_id"] for e in events] == ["t1", "t2"]
    first = events[0]
    assert first["name"] == "f" and first["cat"] == "task"
    assert first["ts"] == pytest.approx(100.0e6)
    assert first["dur"] == pytest.approx(0.25e6)  # the worker's measure, not receive times
    assert first["tid"] == 11 and events[1]["tid"] == 12
    assert first["pid"] == events[1]["pid"] == 1
    assert first["args"] == {"task_id": "t1", "state": "finished", "node_id": NODE,
                             "attempt": 0}
    meta = [e for e in tl.trace_events() if e["ph"] == "M"]
    assert {"name": "process_name", "ph": "M", "pid": 1, "tid": 0,
            "args": {"name": f"node {NODE}"}} in meta
    assert {(e["tid"], e["args"]["name"]) for e in meta if e["name"] == "thread_name"} == {
        (11, "worker 11"), (12, "worker 12")}


def test_a_late_start_notice_does_not_push_the_end_past_the_end_record() -> None:
    tl = TaskTimeline()
    # The start notice came 0.1 s late: start + duration would end after the end was known.
    tl.apply([started("t1", 100.1), finished("t1", 100.3, 0.25)])
    (event,) = complete(tl)
    assert event["ts"] + event["dur"] == pytest.approx(100.3e6)
    assert event["dur"] == pytest.approx(0.25e6)


def test_failed_tasks_are_marked_and_never_run_ones_are_not_executions() -> None:
    tl = TaskTimeline()
    tl.apply([started("t1", 10.0), failed("t1", 10.4, 0.3),
              # A task whose dependency failed: no worker ran it (pid 0, no start).
              failed("t2", 10.5, 0.0, pid=0)])
    (event,) = complete(tl)
    assert event["args"]["state"] == "failed"
    assert event["args"]["error_type"] == "ValueError"
    assert event["args"]["error"] == "bad value"
    assert event["cname"] == "terrible"
    assert event["dur"] == pytest.approx(0.3e6)


def test_a_task_reported_only_at_its_end_starts_at_end_minus_duration() -> None:
    tl = TaskTimeline()
    # Nested tasks: no TaskStarted record, only the end with the measured duration.
    tl.apply([ev.WorkerUp(1.0, "n2", 21), finished("t1", 20.0, 2.0, pid=21, node="n2"),
              failed("t2", 30.0, 1.0, pid=21)])  # a failure names no node: the pid's node
    one, two = complete(tl)
    assert one["ts"] == pytest.approx(18.0e6) and one["dur"] == pytest.approx(2.0e6)
    assert two["ts"] == pytest.approx(29.0e6)
    assert two["args"]["node_id"] == "n2" and one["pid"] == two["pid"]


def test_a_failure_on_an_unknown_worker_goes_to_the_default_node() -> None:
    tl = TaskTimeline()
    tl.default_node = NODE
    tl.apply([failed("t1", 5.0, 1.0, pid=77)])
    (event,) = complete(tl)
    assert event["args"]["node_id"] == NODE and event["tid"] == 77


def test_duplicate_records_do_not_add_or_reopen_executions() -> None:
    tl = TaskTimeline()
    batch = [started("t1", 1.0), finished("t1", 2.0, 1.0)]
    tl.apply(batch)
    # The same records again (a replay overlap), and a late batched start notice.
    tl.apply(batch)
    tl.apply([started("t1", 1.1)])
    assert len(complete(tl)) == 1
    assert tl.executions(include_running=True)[0].state == "finished"
    assert not any(w.busy for w in tl.workers())


def test_a_retried_attempt_and_the_next_one_are_two_executions() -> None:
    tl = TaskTimeline()
    tl.apply([started("t1", 1.0, pid=11),
              ev.TaskRetried(2.0, "t1", "f", 1, "worker died"),
              ev.TaskRetried(2.0, "t1", "f", 1, "worker died"),  # a duplicate: ignored
              started("t1", 3.0, pid=12), finished("t1", 3.6, 0.5, pid=12)])
    first, second = complete(tl)
    assert first["args"]["state"] == "retried" and first["args"]["error"] == "worker died"
    assert first["tid"] == 11 and first["dur"] == pytest.approx(1.0e6)
    assert second["args"]["state"] == "finished" and second["args"]["attempt"] == 1
    assert second["tid"] == 12


def test_the_record_is_bounded_and_counts_what_it_dropped() -> None:
    tl = TaskTimeline(max_executions=3)
    for i in range(5):
        tl.apply([started(f"t{i}", float(i)), finished(f"t{i}", i + 0.5, 0.5)])
    assert [e["args"]["task_id"] for e in complete(tl)] == ["t2", "t3", "t4"]
    assert tl.dropped == 2
    assert tl.count() == 3


def test_running_executions_are_open_and_bounded() -> None:
    tl = TaskTimeline(max_running=2)
    tl.apply([started("a", 1.0, pid=1), started("b", 1.0, pid=2), started("c", 1.0, pid=3)])
    running = tl.executions(include_running=True)
    assert [r.task_id for r in running] == ["b", "c"]  # the oldest open one was let go
    assert all(r.end is None and r.state == "running" for r in running)
    assert complete(tl) == []  # the trace holds finished executions only
    assert [r.task_id for r in tl.executions(include_running=True, last=1)] == ["c"]


def test_workers_busy_idle_and_down() -> None:
    tl = TaskTimeline()
    tl.apply([ev.WorkerUp(0.0, NODE, 11), ev.WorkerUp(0.0, NODE, 12),
              started("t1", 1.0, pid=11, name="train")])
    by_pid = {w.pid: w for w in tl.workers()}
    assert by_pid[11].busy and by_pid[11].task_name == "train" and by_pid[11].task_id == "t1"
    assert not by_pid[12].busy and by_pid[12].state == "up"
    tl.apply([finished("t1", 2.0, 1.0, pid=11), ev.WorkerDown(3.0, NODE, 12, "exited")])
    by_pid = {w.pid: w for w in tl.workers()}
    assert not by_pid[11].busy and by_pid[11].tasks_done == 1
    assert by_pid[12].state == "down"


def test_version_moves_only_on_changes() -> None:
    tl = TaskTimeline()
    v0 = tl.version
    tl.apply([ev.ObjectFreed(1.0, "o1")])  # nothing the timeline keeps
    assert tl.version == v0
    tl.apply([started("t1", 1.0)])
    assert tl.version > v0


def test_write_trace_is_chrome_trace_json(tmp_path: Path) -> None:
    tl = TaskTimeline()
    tl.apply([started("t1", 1.0), finished("t1", 2.0, 1.0)])
    path = tmp_path / "trace.json"
    tracing.write_trace(tl.trace_events(), path)
    data = json.loads(path.read_text())
    assert [e["args"]["task_id"] for e in data["traceEvents"] if e["ph"] == "X"] == ["t1"]
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left


def test_history_is_cut_at_the_start_of_the_current_cluster(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # As when no cluster runs in this process (other tests may have one up): the last cluster
    # is the one the newest records name.
    monkeypatch.setattr(tracing, "_cluster_nodes", lambda: set())
    old = [started("t1", 1.0, node="old"), finished("t1", 2.0, 1.0, node="old"),
           ev.ObjectFreed(2.5, "o1")]
    new = [ev.TaskSubmitted(3.0, "t1", "g", (), ("o2",), None),
           started("t1", 3.1, node="new"), finished("t1", 3.2, 0.1, node="new")]
    # Records that name no node cannot be told apart: those after the old cluster's last
    # node-naming record are kept (ids the new cluster's fold does not know: no effect).
    assert tracing.current_cluster_history(old + new) == old[2:] + new
    assert tracing.current_cluster_history(old[:2] + new) == new
    assert tracing.current_cluster_history(old) == old
    assert tracing.current_cluster_history([]) == []


def test_a_recording_follows_the_event_stream_from_its_begin() -> None:
    rec = tracing.Recording(max_executions=10)
    try:
        ev.publish(started("before-begin-1", 1.0))
        ev.publish(finished("before-begin-1", 2.0, 1.0))
        rec.begin()
        ev.publish(started("after-begin-1", 3.0))
        ev.publish(finished("after-begin-1", 4.0, 1.0))
        ev.bus().flush()
        ids = rec.peek(lambda tl: [e["args"]["task_id"] for e in complete(tl)])
        assert ids == ["after-begin-1"]
    finally:
        rec.stop()
    ev.publish(started("after-stop-1", 5.0))
    ev.bus().flush()
    assert rec.peek(lambda tl: tl.count(include_running=True)) == 1

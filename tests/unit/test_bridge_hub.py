"""The comm bridge's hub, without a kernel: a long backlog of records leaves as several small
deltas while it is applied, and nothing is lost between them."""

from __future__ import annotations

import time
from typing import Any

import pytest

from nbdist import events
from nbdist.events import tally
from nbdist.jupyter import bridge


class FakeClock:
    """The hub's clocks, moved by the test: wall-clock and monotonic time alike."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def fake_hub(interval: float) -> tuple[bridge.Hub, FakeClock]:
    clock = FakeClock()
    return bridge.Hub(interval=interval, clock=clock.time, monotonic=clock.time), clock


class RecordingComm:
    comm_id = "test"

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send(self, data: dict[str, Any]) -> None:
        self.sent.append(data)


def test_a_backlog_leaves_in_several_deltas_and_all_tasks_arrive(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bridge, "CHUNK", 200)
    monkeypatch.setattr(bridge, "BURST_TASKS", 10_000)  # a backlog, not a burst
    hub = bridge.Hub(interval=60.0)  # no timer-driven delta during the test
    comm = RecordingComm()
    hub._comms.append(comm)
    now = time.time()
    batch: list[events.Event] = [
        events.TaskSubmitted(now, f"{i:018x}", "f", (), (f"{i + 1:018x}",), None)
        for i in range(0, 3000, 2)]  # 1,500 tasks: below the grouping threshold
    hub.on_events(batch)
    during = len(comm.sent)
    assert during >= 3, "a long backlog should not wait for the whole batch"
    assert all(len(d["tasks"]) <= bridge.BIG_DELTA + 200 for d in comm.sent)
    hub.flush()
    seen = {tid for d in comm.sent for tid in d["tasks"]}
    assert seen == {e.task_id for e in batch}  # type: ignore[attr-defined]
    assert [d["seq"] for d in comm.sent] == sorted(d["seq"] for d in comm.sent)


def test_small_batches_leave_at_most_once_per_interval() -> None:
    hub, clock = fake_hub(interval=1.0)
    comm = RecordingComm()
    hub._comms.append(comm)

    def submitted(tid: str) -> list[events.Event]:
        return [events.TaskSubmitted(clock.time(), tid * 18, "f", (), ("f" * 18,), None)]

    hub.on_events(submitted("a"))  # nothing sent for an interval: this one goes at once
    assert len(comm.sent) == 1 and list(comm.sent[0]["tasks"]) == ["a" * 18]
    clock.advance(0.9)
    hub.on_events(submitted("b"))  # within the interval: it waits for the sender thread
    assert len(comm.sent) == 1
    clock.advance(0.2)
    hub.on_events(submitted("c"))  # an interval after the last delta: it goes itself
    assert len(comm.sent) == 2 and sorted(comm.sent[1]["tasks"]) == ["b" * 18, "c" * 18]
    assert comm.sent[1]["time"] == round(clock.time(), 3)  # stamped by the model's clock


def test_a_burst_past_the_grouping_threshold_goes_out_as_groups(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bridge, "CHUNK", 200)
    hub = bridge.Hub(interval=0.0)  # a delta would be due after every chunk
    comm = RecordingComm()
    hub._comms.append(comm)
    now = time.time()
    burst: list[events.Event] = [
        events.TaskSubmitted(now, f"{i:018x}", "f", (), (f"{i + 1:018x}",), None)
        for i in range(0, 6000, 2)]  # 3,000 tasks: past the threshold of 2,000
    hub.on_events(burst)
    # No single task went out on the way to groups; grouped deltas are the sender thread's,
    # with counts from the engine's tally of the same records.
    assert comm.sent == []
    folded = tally.Tally()
    folded.fold(burst)
    hub.summary = lambda: folded.snapshot(time.time())
    hub.flush()
    first = comm.sent[0]
    assert first["type"] == "snapshot" and first["grouped"] and first["tasks"] == {}
    assert sum(g["total"] for g in first["groups"].values()) == 3000
    assert first["totals"]["scheduled"] == 3000


def test_grouped_deltas_come_at_the_shorter_grouped_cadence() -> None:
    hub, clock = fake_hub(interval=60.0)
    assert hub.grouped_interval == 60.0 * bridge.GROUPED_SHARE < hub.interval
    comm = RecordingComm()
    hub._comms.append(comm)
    now = time.time()
    burst: list[events.Event] = [
        events.TaskSubmitted(now, f"{i:018x}", "f", (), (f"{i + 1:018x}",), None)
        for i in range(0, 6000, 2)]
    folded = tally.Tally()
    folded.fold(burst)
    hub.summary = lambda: folded.snapshot(time.time())
    hub.on_events(burst)
    hub.flush()  # the switch to groups: a snapshot
    assert len(comm.sent) == 1 and comm.sent[0]["grouped"]
    folded.fold([events.TaskSubmitted(time.time(), f"{10_000:018x}", "g", (),
                                      (f"{10_001:018x}",), None)])
    hub.flush(only_if_due=True)  # one was just sent: not due
    assert len(comm.sent) == 1
    clock.advance(0.4 * hub.interval)
    hub.flush(only_if_due=True)  # not yet past the grouped cadence
    assert len(comm.sent) == 1
    # Past the grouped cadence, though not past the ungrouped one: due.
    clock.advance(0.2 * hub.interval)
    hub.flush(only_if_due=True)
    assert len(comm.sent) == 2 and comm.sent[1]["type"] == "delta"
    assert "g" in {g["name"] for g in comm.sent[1]["groups"].values()}


def test_a_burst_below_the_threshold_is_held_briefly_then_sent() -> None:
    hub, clock = fake_hub(interval=0.0)
    comm = RecordingComm()
    hub._comms.append(comm)
    burst: list[events.Event] = [
        events.TaskSubmitted(clock.time(), f"{i:018x}", "f", (), (f"{i + 1:018x}",), None)
        for i in range(0, 2 * bridge.BURST_TASKS, 2)]
    hub.on_events(burst)
    hub.flush()
    assert comm.sent == [], "a burst may be on its way to groups: nothing yet"
    clock.advance(bridge.BURST_HOLD_S * 0.9)
    hub.flush()
    assert comm.sent == []
    clock.advance(bridge.BURST_HOLD_S * 0.2)
    hub.flush()  # the burst ended: its tasks go out one by one after all
    assert len(comm.sent[0]["tasks"]) == bridge.BURST_TASKS


def test_a_burst_that_goes_on_is_held_at_most_burst_max(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bridge, "BURST_TASKS", 20)  # (never near the grouping threshold)
    hub, clock = fake_hub(interval=0.0)
    comm = RecordingComm()
    hub._comms.append(comm)
    step = bridge.BURST_HOLD_S / 2
    first = 0
    while not comm.sent:
        assert clock.time() - 1_000_000.0 < bridge.BURST_MAX_S + 2 * bridge.BURST_HOLD_S, \
            "a burst that never ends held the panel's deltas for good"
        hub.on_events([
            events.TaskSubmitted(clock.time(), f"{i:018x}", "f", (), (f"{i + 1:018x}",), None)
            for i in range(first, first + 2 * bridge.BURST_TASKS, 2)])
        first += 2 * bridge.BURST_TASKS
        hub.flush()
        clock.advance(step)
    assert clock.time() - 1_000_000.0 >= bridge.BURST_MAX_S
    assert comm.sent[0]["type"] == "delta" and not comm.sent[0]["grouped"]


def test_a_delta_is_as_of_the_last_batch_applied_in_full(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bridge, "CHUNK", 100)
    monkeypatch.setattr(bridge, "BURST_TASKS", 10_000)
    hub = bridge.Hub(interval=0.0)  # a delta after every chunk
    comm = RecordingComm()
    hub._comms.append(comm)

    def batch(first: int, n: int) -> list[events.Event]:
        return [events.TaskSubmitted(time.time(), f"{i:018x}", "f", (), (f"{i + 1:018x}",),
                                     None) for i in range(first, first + 2 * n, 2)]

    monkeypatch.setattr(events.bus(), "drained_at", 100.0)
    hub.on_events(batch(0, 50))
    assert [d["as_of"] for d in comm.sent] == [100.0]
    monkeypatch.setattr(events.bus(), "drained_at", 200.0)
    hub.on_events(batch(1000, 300))  # three chunks: a delta after each
    # Taken before the batch was all in: as of the previous one; then as of this one.
    assert [d["as_of"] for d in comm.sent[1:]] == [100.0, 100.0, 200.0]


def test_records_published_before_the_cluster_went_reach_the_panel_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    up = [True]
    monkeypatch.setattr(bridge.nbdist, "is_initialized", lambda: up[0])
    hub = bridge.Hub(interval=60.0)  # only the explicit flushes below send
    comm = RecordingComm()
    hub._comms.append(comm)
    hub._subscribe()
    try:
        hub.flush()
        # A put just before shutdown(): its record is still in the event stream's batch
        # (delivered every BATCH_INTERVAL_S) when the sender thread sees the cluster gone.
        events.publish(events.ObjectCreated(time.time(), "ab" * 9, 8_000_000, "n1", "d",
                                            None, True))
        up[0] = False
        hub.flush()
        down = [i for i, d in enumerate(comm.sent) if d["cluster"] is False]
        assert down, "the panel never heard that the cluster stopped"
        listed = [i for i, d in enumerate(comm.sent) if "ab" * 9 in d.get("objects", {})]
        assert listed and listed[0] <= down[0], (listed, down)
    finally:
        hub._shut()


def test_records_after_the_switch_to_groups_in_the_same_batch_still_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A wait begun (and done) right after a burst that crosses the grouping threshold, in
    the batch that carries the burst."""
    monkeypatch.setattr(bridge, "CHUNK", 200)
    hub = bridge.Hub(interval=60.0)
    comm = RecordingComm()
    hub._comms.append(comm)
    now = time.time()
    burst: list[events.Event] = [
        events.TaskSubmitted(now, f"{i:018x}", "f", (), (f"{i + 1:018x}",), None)
        for i in range(0, 6000, 2)]
    refs = tuple(f"{i + 1:018x}" for i in range(0, 6000, 2))
    burst += [events.WaitBegun(now, 1, "get", refs, len(refs), 0, "c1"),
              events.WaitDone(now, 1, len(refs), len(refs), False)]
    folded = tally.Tally()
    folded.fold(burst)
    hub.summary = lambda: folded.snapshot(time.time())
    hub.on_events(burst)
    hub.flush()
    [wait] = comm.sent[-1]["waits"].values()
    assert (wait["ready"], wait["total"], wait["done"]) == (3000, 3000, True)

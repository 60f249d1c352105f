"""The engine's tally (nbdist/events/tally.py) folding records as the runtime publishes them: compact
(the record's fields, ids as ints) or built, through one handler per record class."""

from __future__ import annotations

import pytest

from nbdist import events as ev
from nbdist.events.tally import SPANS, Tally

NODE = "n1"


def raw(cls: type[ev.Event], *args: object) -> object:
    """A record as the runtime publishes it when nobody wants it built."""
    bus = ev.EventBus()
    bus.publish_later(cls, args)
    [item] = bus.recent(raw=True)
    return item


def submitted(task_id: int, name: str = "f", deps: tuple[int, ...] = (), nret: int = 1,
              tag: str | None = "cell") -> object:
    return raw(ev.TaskSubmitted, 1.0, task_id, name, deps,
               range(task_id + 1, task_id + 1 + nret), None, None, tag)


def ran(task_id: int, name: str = "f", pid: int = 7, started: float = 2.0) -> list[object]:
    return [raw(ev.TaskStarted, started, task_id, name, NODE, pid),
            raw(ev.TaskFinished, started + 1, task_id, name, 0.5, NODE, pid, started),
            raw(ev.ObjectCreated, started + 1, task_id + 1, 10, NODE, 99, task_id, False)]


def counts(tally: Tally, name: str = "f", tag: str | None = "cell") -> tuple[int, ...]:
    for group in tally.snapshot(0.0).groups:
        if group[:2] == (name, tag):
            return group[2:]
    raise AssertionError(f"no group {name}/{tag}")


def test_a_task_goes_through_its_states() -> None:
    tally = Tally()
    tally.fold([submitted(100)])
    assert counts(tally) == (0, 1, 0, 0, 0)  # no arguments: scheduled at once
    assert tally.lookup([f"{101:x}"]) == {f"{101:x}": {"task": "f", "state": "scheduled"}}
    tally.fold([raw(ev.TaskStarted, 2.0, 100, "f", NODE, 7)])
    assert counts(tally) == (0, 0, 1, 0, 0)
    assert tally.lookup(["65"])["65"] == {"task": "f", "state": "running", "node": NODE}
    tally.fold(ran(100)[1:])
    assert counts(tally) == (0, 0, 0, 1, 0)
    assert tally.lookup(["65"])["65"] == {"task": "f", "state": "finished", "size": 10,
                                          "node": NODE}
    summary = tally.snapshot(5.0)
    [(node, pid, task, task_name, done, busy, spans)] = summary.workers
    assert (node, pid, task, task_name, done, busy) == (NODE, 7, None, None, 1, 0.5)
    assert spans == ((f"{100:018x}", "f", 2.0, 2.5, False),)
    assert summary.nodes == ((NODE, 0, 1, 10, 0),)
    tally.fold([raw(ev.ObjectFreed, 6.0, 101)])
    assert tally.lookup(["65"]) == {} and tally.snapshot(6.0).objects_freed == 1
    assert tally.snapshot(6.0).nodes == ((NODE, 0, 0, 0, 0),)


def test_arguments_pending_until_they_exist_and_edges_between_groups() -> None:
    tally = Tally()
    tally.fold([submitted(100, "load"), submitted(200, "use", deps=(101, 501)),
                submitted(300, "use", deps=(101,))])
    assert counts(tally, "use") == (2, 0, 0, 0, 0)
    tally.fold(ran(100, "load"))
    assert counts(tally, "use") == (1, 1, 0, 0, 0)  # 200 still waits for 501
    tally.fold([raw(ev.ObjectCreated, 3.0, 501, 4, NODE, 99, None, True)])  # a put
    assert counts(tally, "use") == (0, 2, 0, 0, 0)
    summary = tally.snapshot(4.0)
    assert [g[:2] for g in summary.groups] == [("load", "cell"), ("use", "cell")]
    assert summary.edges == ((0, 1, 2),)
    assert summary.nodes == ((NODE, 0, 2, 14, 4),)


def test_failures_retries_and_built_records() -> None:
    tally = Tally()
    tally.fold([submitted(100), submitted(200, deps=(101,)),
                raw(ev.TaskStarted, 2.0, 100, "f", NODE, 7)])
    tally.fold([ev.TaskRetried(3.0, f"{100:018x}", "f", 1, "worker died")])
    assert counts(tally) == (1, 1, 0, 0, 0)  # back to waiting for a worker
    assert tally.snapshot(3.0).nodes == ((NODE, 0, 0, 0, 0),)
    tally.fold([raw(ev.TaskStarted, 3.5, 100, "f", NODE, 7),
                ev.TaskFailed(4.0, f"{100:018x}", "f", "KeyError", "k", 0.1, 7, 3.9)])
    assert counts(tally) == (0, 1, 0, 0, 1)  # its error is there for 200: it may run
    assert tally.lookup([f"{101:x}"])[f"{101:x}"]["state"] == "failed"
    # Records someone else had built arrive built: folded the same way.
    tally.fold([ev.TaskStarted(5.0, f"{200:018x}", "f", NODE, 8),
                ev.TaskFinished(6.0, f"{200:018x}", "f", 0.2, NODE, 8, 5.8),
                ev.ObjectCreated(6.0, f"{201:018x}", 3, NODE, "d", f"{200:018x}", False)])
    assert counts(tally) == (0, 0, 0, 1, 1)
    workers = {w[1]: w for w in tally.snapshot(7.0).workers}
    assert workers[7][6][0][4] is True and workers[8][4] == 1


def test_duplicates_and_foreign_ids_change_nothing() -> None:
    tally = Tally()
    first = submitted(100)
    tally.fold([first, first, *ran(100), raw(ev.TaskStarted, 9.0, 100, "f", NODE, 7)])
    assert counts(tally) == (0, 0, 0, 1, 0)
    tally.fold([ev.TaskSubmitted(1.0, "not-hex", "f", (), ("x",), None)])
    assert counts(tally) == (0, 0, 0, 1, 0)


def test_worker_spans_are_bounded() -> None:
    tally = Tally()
    for i in range(SPANS + 5):
        tally.fold([submitted(100 * (i + 1)), *ran(100 * (i + 1), started=float(i))])
    [worker] = tally.snapshot(0.0).workers
    assert worker[4] == SPANS + 5 and len(worker[6]) == SPANS
    assert worker[6][-1][0] == f"{100 * (SPANS + 5):018x}"


def test_following_the_stream_from_its_history_without_counting_twice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    bus = ev.EventBus()
    monkeypatch.setattr(ev, "bus", lambda: bus)
    tally = Tally()
    bus.publish_later(ev.TaskSubmitted, (1.0, 100, "f", (), (101,), None, None, "cell"))
    tally.summary()  # starts: folds the history, then follows the stream
    for item in ran(100):
        bus.publish(item)
    summary = tally.summary()
    assert [g[2:] for g in summary.groups] == [(0, 0, 0, 1, 0)]
    assert 0 < summary.news_since <= summary.time


def test_records_whose_return_ids_do_not_follow_the_task_id() -> None:
    # (Ray's ids, on the Ray backend: the records say which objects a task returns.)
    tally = Tally()
    tally.fold([ev.TaskSubmitted(1.0, "aa", "load", (), ("0f",), None, None, "cell"),
                ev.TaskSubmitted(1.0, "bb", "use", ("0f",), ("1f",), None, None, "cell")])
    assert counts(tally, "use") == (1, 0, 0, 0, 0)
    tally.fold([ev.TaskStarted(2.0, "aa", "load", NODE, 7),
                ev.TaskFailed(3.0, "aa", "load", "KeyError", "k", 0.5, 7, 2.5)])
    assert counts(tally, "use") == (0, 1, 0, 0, 0)  # its argument holds the error: ready
    assert tally.snapshot(4.0).edges == ((0, 1, 1),)
    assert tally.lookup(["0f"])["0f"] == {"task": "load", "state": "failed"}


def test_a_worker_ending_short_tasks_counts_as_running_the_next() -> None:
    """A task shorter than the node's notice batch is told started only as it ends: while
    tasks are scheduled, the worker that just ended one runs the next."""
    tally = Tally()
    tally.fold([submitted(100 + 10 * i) for i in range(4)])
    tally.fold(ran(100, started=2.0))  # ended at 2.5 (duration 0.5)
    summary = tally.snapshot(2.6)
    assert summary.groups[0][2:] == (0, 2, 1, 1, 0)
    [worker] = summary.workers
    assert (worker[2], worker[3]) == (None, "f")  # busy, its task id not known yet
    assert summary.nodes[0][1] == 1
    idle = tally.snapshot(60.0)  # nothing ended for a minute: idle
    assert idle.groups[0][2:] == (0, 3, 0, 1, 0) and idle.workers[0][3] is None
    tally.fold([x for i in range(1, 4) for x in ran(100 + 10 * i, started=3.0)])
    done = tally.snapshot(3.6)  # nothing scheduled is left to run
    assert done.groups[0][2:] == (0, 0, 0, 4, 0) and done.nodes[0][1] == 0


def test_objects_spilled_and_restored_leave_and_reenter_shared_memory() -> None:
    tally = Tally()
    tally.fold([raw(ev.ObjectCreated, 1.0, 501, 4096, NODE, 99, None, True)])
    assert tally.snapshot(1.0).nodes == ((NODE, 0, 1, 4096, 4096),)
    tally.fold([raw(ev.ObjectSpilled, 2.0, 501, 4096, NODE)])
    assert tally.snapshot(2.0).nodes == ((NODE, 0, 1, 4096, 0),)
    assert tally.lookup([f"{501:x}"])[f"{501:x}"]["spilled"] is True
    tally.fold([ev.ObjectRestored(3.0, f"{501:018x}", 4096, NODE)])  # built: the same
    assert tally.snapshot(3.0).nodes == ((NODE, 0, 1, 4096, 4096),)
    tally.fold([raw(ev.ObjectSpilled, 4.0, 501, 4096, NODE),
                raw(ev.ObjectFreed, 5.0, 501, 4096, NODE)])
    assert tally.snapshot(5.0).nodes == ((NODE, 0, 0, 0, 0),)


def test_one_handler_per_record_class_reads_compact_and_built_alike() -> None:
    compact, built = Tally(), Tally()
    items = [submitted(100), *ran(100), raw(ev.ObjectFreed, 6.0, 101, 10, NODE)]
    compact.fold(items)
    built.fold([ev.build(x) for x in items])
    assert compact.snapshot(9.0) == built.snapshot(9.0)

"""The event stream (``nbdist.events``) and remote output reaching the driver.

Events arrive asynchronously in batches, so every check waits for the events it needs. Tasks
are told apart by function names, each used by one test only: the cluster is shared with other
tests and a subscriber may be sent events from before it subscribed.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import uuid
from collections.abc import Iterator

import pytest

import nbdist

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("cluster")]


class Collector:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list = []
        self.batches = 0

    def __call__(self, batch) -> None:
        with self.lock:
            self.batches += 1
            self.events.extend(batch)

    def of(self, kind: str, **fields) -> list:
        with self.lock:
            return [
                e
                for e in self.events
                if e.kind == kind and all(getattr(e, k, None) == v for k, v in fields.items())
            ]


@pytest.fixture
def collector() -> Iterator[Collector]:
    from nbdist import events

    collect = Collector()
    unsubscribe = events.subscribe(collect)
    yield collect
    unsubscribe()


def _as_int(object_id) -> int:
    return int(object_id, 16) if isinstance(object_id, str) else int(object_id)


@nbdist.remote
def ev_source(x: int) -> int:
    return x


@nbdist.remote
def ev_combine(a: int, b: int) -> int:
    return a + b


@nbdist.remote
def ev_waited(x: int) -> int:
    return x


@nbdist.remote
def ev_unheard(x: int) -> int:
    return x


@nbdist.remote
def ev_fail() -> None:
    raise RuntimeError("deliberate")


@pytest.mark.nbdist_only
def test_dag_reports_submitted_and_finished_for_every_task(collector, wait_until) -> None:
    a = ev_source.remote(1)
    b = ev_source.remote(2)
    c = ev_combine.remote(a, b)
    assert nbdist.get(c) == 3

    wait_until(
        lambda: (
            len(collector.of("task_finished", name="ev_source")) >= 2
            and collector.of("task_finished", name="ev_combine")
        ),
        what="task_finished for both sources and the combine task",
    )
    sources = collector.of("task_submitted", name="ev_source")
    (combine,) = collector.of("task_submitted", name="ev_combine")
    assert len(sources) == 2
    assert all(list(s.deps) == [] for s in sources)
    assert {_as_int(d) for d in combine.deps} == {_as_int(a.hex()), _as_int(b.hex())}

    submitted_ids = {e.task_id for e in sources} | {combine.task_id}
    finished_ids = {
        e.task_id for e in collector.of("task_finished") if e.name in ("ev_source", "ev_combine")
    }
    assert finished_ids == submitted_ids
    assert len(submitted_ids) == 3
    assert collector.batches >= 1


@pytest.mark.nbdist_only
def test_failed_task_reports_task_failed(collector, wait_until) -> None:
    with pytest.raises(RuntimeError):
        nbdist.get(ev_fail.remote())
    wait_until(lambda: collector.of("task_failed", name="ev_fail"), what="a task_failed event")
    assert not collector.of("task_finished", name="ev_fail")


@pytest.mark.nbdist_only
def test_put_and_wait_report_object_and_wait_events(collector, wait_until) -> None:
    ref = nbdist.put(list(range(1000)))
    other = ev_waited.remote(5)
    nbdist.wait([ref, other], num_returns=2)
    ids = {_as_int(ref.hex()), _as_int(other.hex())}

    wait_until(
        lambda: [e for e in collector.of("object_created") if _as_int(e.object_id) in ids],
        what="an object_created event for the put",
    )
    (begun,) = wait_until(
        lambda: [
            e
            for e in collector.of("wait_begun")
            if {_as_int(o) for o in e.object_ids} == ids and e.num_returns == 2
        ],
        what="a wait_begun event naming both refs",
    )
    (done,) = wait_until(
        lambda: collector.of("wait_done", wait_id=begun.wait_id), what="the matching wait_done"
    )
    assert done.ready == 2 and not done.timed_out


@pytest.mark.nbdist_only
def test_unsubscribed_callback_receives_nothing_more(wait_until) -> None:
    from nbdist import events

    kept, dropped = Collector(), Collector()
    stop_kept = events.subscribe(kept)
    stop_dropped = events.subscribe(dropped)
    stop_dropped()
    try:
        assert nbdist.get(ev_unheard.remote(1)) == 1
        wait_until(lambda: kept.of("task_finished", name="ev_unheard"), what="the kept callback")
        assert not dropped.of("task_finished", name="ev_unheard")
    finally:
        stop_kept()


@nbdist.remote
def ev_print(token: str) -> int:
    print(f"out {token}", flush=True)
    print(f"err {token}", file=sys.stderr, flush=True)
    return os.getpid()


@pytest.mark.nbdist_only
def test_task_output_becomes_stdout_events(collector, wait_until) -> None:
    token = uuid.uuid4().hex
    nbdist.get(ev_print.remote(token))

    def lines(stream: str) -> list:
        return [
            e
            for e in collector.of("stdout", name="ev_print")
            if token in e.line and e.stream == stream
        ]

    out = wait_until(lambda: lines("stdout"), what="a stdout event with the task's line")
    err = wait_until(lambda: lines("stderr"), what="a stdout event for the task's stderr line")
    assert out[0].line.rstrip("\n") == f"out {token}"
    assert err[0].line.rstrip("\n") == f"err {token}"
    assert out[0].task_id


def test_task_output_reaches_driver_with_prefix(capfd, wait_until) -> None:
    token = uuid.uuid4().hex
    pid = nbdist.get(ev_print.remote(token))
    seen = {"out": "", "err": ""}

    def printed() -> bool:
        captured = capfd.readouterr()
        seen["out"] += captured.out
        seen["err"] += captured.err
        return f"out {token}" in seen["out"] and f"err {token}" in seen["err"]

    wait_until(printed, what="the task's output on the driver")
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    out, err = ansi.sub("", seen["out"]), ansi.sub("", seen["err"])
    assert f"(ev_print pid={pid}) out {token}" in out
    assert f"(ev_print pid={pid}) err {token}" in err


@nbdist.remote
def ev_staggered(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


def test_get_reports_progress_while_values_arrive(collector, wait_until) -> None:
    refs = [ev_staggered.remote(0.2 * (i + 1)) for i in range(3)]
    assert nbdist.get(refs) == [0.2, 0.4, 0.6000000000000001]
    ids = {_as_int(r.hex()) for r in refs}
    (begun,) = wait_until(
        lambda: [e for e in collector.of("wait_begun", call="get")
                 if {_as_int(o) for o in e.object_ids} == ids],
        what="a wait_begun event for the get",
    )
    progress = wait_until(
        lambda: collector.of("wait_progress", wait_id=begun.wait_id),
        what="wait_progress events while the values arrive",
    )
    readies = [p.ready for p in progress]
    assert readies == sorted(readies) and set(readies) <= {1, 2}
    assert all(p.total == 3 for p in progress)
    (done,) = wait_until(lambda: collector.of("wait_done", wait_id=begun.wait_id),
                         what="the get's wait_done")
    assert done.ready == 3


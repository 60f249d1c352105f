"""The event stream and remote output on both backends: what the notebook layer and the panel
consume (submissions with dependencies and submitter tags, puts, waits, actors, task states,
output lines routed by tag)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import nbdist
from nbdist import events

pytestmark = pytest.mark.timeout(180)


@nbdist.remote
def shout(word):
    print(f"{word}!")
    print("to stderr", file=__import__("sys").stderr)
    return word


@nbdist.remote
def add(a, b):
    return a + b


@nbdist.remote
def parent(n):
    return nbdist.get(shout.remote(f"child {n}"))


@nbdist.remote
class Box:
    def __init__(self, v):
        self.v = v

    def get(self):
        return self.v


class Recorder:
    def __init__(self) -> None:
        self.events: list[events.Event] = []
        self.lines: list[events.Output] = []
        self.lock = threading.Lock()

    def on_events(self, batch: list[events.Event]) -> None:
        with self.lock:
            self.events.extend(batch)

    def on_output(self, lines: list[events.Output]) -> bool:
        with self.lock:
            self.lines.extend(lines)
        return True

    def of(self, kind: type) -> list:
        with self.lock:
            return [e for e in self.events if isinstance(e, kind)]


@pytest.fixture
def rec(backend) -> Iterator[Recorder]:
    r = Recorder()
    unsubscribe = events.subscribe(r.on_events)
    events.set_output_handler(r.on_output)
    events.set_submitter(lambda: "cell-7")
    try:
        yield r
    finally:
        events.set_submitter(None)
        events.set_output_handler(None)
        unsubscribe()


def test_submission_records_dependencies_returns_and_tag(rec, wait_until) -> None:
    first = add.remote(1, 2)
    second = add.remote(first, 3)
    assert nbdist.get(second) == 6
    subs = wait_until(lambda: [e for e in rec.of(events.TaskSubmitted)
                               if second.hex() in e.returns], what="TaskSubmitted of second")
    assert subs[0].deps == (first.hex(),)
    assert subs[0].submitter == "cell-7" and subs[0].name == "add"


def test_task_states_reach_the_stream(rec, wait_until) -> None:
    ref = add.remote(2, 2)
    assert nbdist.get(ref) == 4
    task = wait_until(lambda: [e for e in rec.of(events.TaskSubmitted) if ref.hex() in e.returns],
                      what="submission")[0].task_id
    finished = wait_until(lambda: [e for e in rec.of(events.TaskFinished) if e.task_id == task],
                          timeout=30, what="TaskFinished")
    started = [e for e in rec.of(events.TaskStarted) if e.task_id == task]
    assert started and started[0].worker_pid > 0 and started[0].node_id
    assert finished[0].name == "add"


def test_failed_task_is_reported_with_its_type(rec, wait_until) -> None:
    ref = add.remote(1, "x")
    with pytest.raises(TypeError):
        nbdist.get(ref)
    task = wait_until(lambda: [e for e in rec.of(events.TaskSubmitted) if ref.hex() in e.returns],
                      what="submission")[0].task_id
    failed = wait_until(lambda: [e for e in rec.of(events.TaskFailed) if e.task_id == task],
                        timeout=30, what="TaskFailed")
    assert failed[0].error_type == "TypeError"


def test_put_and_waits_are_recorded(rec, wait_until) -> None:
    ref = nbdist.put(b"x" * 1000)
    nbdist.wait([ref, add.remote(1, 1)], num_returns=2, timeout=60)
    created = wait_until(lambda: [e for e in rec.of(events.ObjectCreated)
                                  if e.object_id == ref.hex()], what="ObjectCreated")
    assert created[0].size >= 1000
    begun = wait_until(lambda: [e for e in rec.of(events.WaitBegun) if e.call == "wait"],
                       what="WaitBegun")
    assert begun[-1].submitter == "cell-7" and ref.hex() in begun[-1].object_ids
    wait_until(lambda: [e for e in rec.of(events.WaitDone) if e.wait_id == begun[-1].wait_id],
               what="WaitDone")


def test_actor_creation_is_recorded(rec, wait_until) -> None:
    box = Box.options(name="box-events").remote(3)
    assert nbdist.get(box.get.remote()) == 3
    wait_until(lambda: [e for e in rec.of(events.ActorCreated)
                        if e.class_name == "Box" and e.name == "box-events"],
               what="ActorCreated")


def test_remote_prints_reach_the_output_handler_with_the_tag(rec, wait_until) -> None:
    assert nbdist.get(shout.remote("hello")) == "hello"
    lines = wait_until(lambda: [ln for ln in rec.lines if ln.line == "hello!"],
                       what="the task's stdout line")
    assert lines[0].submitter == "cell-7" and lines[0].name == "shout"
    assert lines[0].stream == "stdout" and lines[0].worker_pid > 0
    err = wait_until(lambda: [ln for ln in rec.lines if ln.line == "to stderr"],
                     what="the task's stderr line")
    assert err[0].stream == "stderr"
    wait_until(lambda: [e for e in rec.of(events.Output) if e.line == "hello!"],
               what="the Output event")


def test_nested_task_output_and_submission_inherit_the_tag(rec, wait_until) -> None:
    assert nbdist.get(parent.remote(5)) == "child 5"
    line = wait_until(lambda: [ln for ln in rec.lines if ln.line == "child 5!"],
                      what="the nested task's line")
    assert line[0].submitter == "cell-7"
    nested = wait_until(lambda: [e for e in rec.of(events.TaskSubmitted)
                                 if e.name == "shout" and e.parent_task],
                        what="the nested TaskSubmitted")
    assert nested[0].submitter == "cell-7"

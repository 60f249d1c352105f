"""On backend="ray", a nested task's output line that reaches the driver before its parent's
record of the submission still goes to the cell the parent's work came from: the driver's
record handler (the real one) holds the line until the record names its task."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from polling import poll

from nbdist import events as ev
from nbdist.backends.ray.backend import RayBackend
from nbdist.backends.ray.late_tags import HOLD_S


@pytest.fixture
def backend() -> Iterator[RayBackend]:
    b = RayBackend("driver")
    b.log_to_driver = False
    # What a submission from a notebook cell leaves behind (``_submitted``): the parent's tag.
    b._tagging = True
    b._tag_of["parent"] = "cell-7"
    yield b
    b.late.close()


@pytest.fixture
def lines() -> Iterator[list[Any]]:
    got: list[Any] = []
    stop = ev.subscribe(lambda batch: got.extend(e for e in batch if isinstance(e, ev.Output)))
    yield got
    stop()


def _out(task: str, text: str) -> tuple:
    return ("out", task, "shout", 123, "stdout", text, None, time.time())


def _sub(task: str, parent: str) -> tuple:
    return ("sub", task, "shout", (), (), parent, None, None, time.time())


def _flushed(got: list[Any]) -> list[Any]:
    ev.bus().flush()
    return got


def test_a_line_before_its_submission_record_waits_for_it_and_gets_its_tag(
        backend: RayBackend, lines: list[Any]) -> None:
    backend.on_records([_out("child", "child 5!")], 0)
    assert _flushed(lines) == []  # held: its task is not known yet
    backend.on_records([_sub("child", "parent")], 0)
    shown = poll(lambda: _flushed(lines), what="the held line")
    assert [(e.line, e.submitter) for e in shown] == [("child 5!", "cell-7")]
    backend.on_records([_out("child", "again")], 0)  # known now: not held
    poll(lambda: len(_flushed(lines)) == 2, what="the second line")
    assert lines[1].submitter == "cell-7"


def test_a_line_whose_record_never_comes_goes_on_untagged(backend: RayBackend,
                                                          lines: list[Any]) -> None:
    start = time.monotonic()
    backend.on_records([_out("stranger", "who?")], 0)
    shown = poll(lambda: _flushed(lines), timeout=HOLD_S + 5, what="the line, untagged")
    assert [(e.line, e.submitter) for e in shown] == [("who?", None)]
    assert time.monotonic() - start >= HOLD_S * 0.9


def test_a_script_driver_holds_nothing(lines: list[Any]) -> None:
    b = RayBackend("driver")  # no tagged submission: nothing to wait for
    b.log_to_driver = False
    b.on_records([_out("child", "now")], 0)
    assert [e.line for e in _flushed(lines)] == ["now"]

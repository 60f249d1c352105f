"""Hooks the notebook layer builds on: submitter tags, output handler, cancel by submitter."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from polling import until

import nbdist
from nbdist import events, exceptions


@nbdist.remote
def shout(text: str) -> str:
    print(text)
    return text


@nbdist.remote
def parent_shouts(text: str) -> str:
    return nbdist.get(shout.remote(text))


@nbdist.remote
def wait_for(gate: str) -> str:
    return "released" if until(Path(gate).exists, timeout=60) else "gate never opened"


@pytest.fixture
def tag() -> Iterator[list[str]]:
    current = ["cell-1"]
    events.set_submitter(lambda: current[0])
    yield current
    events.set_submitter(None)
    events.set_output_handler(None)


@pytest.mark.usefixtures("cluster")
def test_submitted_tasks_and_waits_carry_the_tag(tag: list[str], wait_until) -> None:
    seen: list[events.Event] = []
    unsubscribe = events.subscribe(seen.extend)
    try:
        nbdist.get(shout.remote("x"))
        wait_until(lambda: any(isinstance(e, events.TaskSubmitted) and e.submitter == "cell-1"
                               for e in seen), what="a tagged task_submitted event")
    finally:
        unsubscribe()


@pytest.mark.usefixtures("cluster")
def test_output_handler_gets_lines_with_the_root_tasks_tag(tag: list[str], capfd) -> None:
    got: list[events.Output] = []
    done = threading.Event()

    def handler(lines: list[events.Output]) -> bool:
        got.extend(lines)
        done.set()
        return True

    events.set_output_handler(handler)
    tag[0] = "cell-7"
    assert nbdist.get(parent_shouts.remote("from a nested task")) == "from a nested task"
    assert done.wait(10)
    assert got[0].line == "from a nested task" and got[0].submitter == "cell-7"
    assert got[0].name == "shout"
    # Handled lines are not printed by the driver as well.
    assert "from a nested task" not in capfd.readouterr().out


@pytest.mark.usefixtures("cluster")
def test_cancel_submitted_stops_that_submitters_work_only(tag: list[str],
                                                          tmp_path: Path) -> None:
    tag[0] = "cell-a"
    a = [wait_for.remote(str(tmp_path / "never")) for _ in range(2)]
    tag[0] = "cell-b"
    b = wait_for.remote(str(tmp_path / "gate"))
    assert nbdist.cancel_submitted("cell-a", force=True) == 2
    for ref in a:
        with pytest.raises(exceptions.TaskCancelledError):
            nbdist.get(ref, timeout=30)
    (tmp_path / "gate").touch()
    assert nbdist.get(b, timeout=30) == "released"

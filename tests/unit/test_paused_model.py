"""A task paused in the debugger in the panel's Model: from hand-made TaskPaused records (no
kernel, no cluster), it carries where it stopped until it goes on or ends."""

from __future__ import annotations

from nbdist import events as ev
from nbdist.jupyter.model import Model


def test_a_paused_task_carries_where_until_it_goes_on_or_ends() -> None:
    model = Model()
    model.apply([ev.TaskSubmitted(1.0, "a", "f", (), ("a.r",), None, None, "cell-1"),
                 ev.TaskStarted(1.1, "a", "f", "n1", 7),
                 ev.TaskPaused(1.2, "a", "f", 7, "n1", "cell.py:3 (f)")])
    assert model.snapshot()["tasks"]["a"]["paused"] == "cell.py:3 (f)"
    model.take_delta()
    model.apply([ev.TaskPaused(1.3, "a", "f", 7, "n1", "cell.py:3 (f)", paused=False,
                               how="continue")])
    delta = model.take_delta()
    assert delta is not None and "paused" not in delta["tasks"]["a"]
    model.apply([ev.TaskPaused(1.4, "a", "f", 7, "n1", "cell.py:5 (f)"),
                 ev.TaskFinished(1.5, "a", "f", 0.4, "n1", 7)])
    task = model.snapshot()["tasks"]["a"]
    assert task["state"] == "finished" and "paused" not in task
    assert "task_paused" in model.kinds()


def test_a_pause_recorded_before_the_start_is_kept() -> None:
    # The pause travels on the task's output, its start on another path: either comes first.
    model = Model()
    model.apply([ev.TaskSubmitted(1.0, "a", "f", (), ("a.r",), None, None, "cell-1"),
                 ev.TaskPaused(1.1, "a", "f", 7, "n1", "cell.py:3 (f)"),
                 ev.TaskStarted(1.2, "a", "f", "n1", 7)])
    task = model.snapshot()["tasks"]["a"]
    assert task["state"] == "running" and task["paused"] == "cell.py:3 (f)"

"""Step-through mode in the panel's Model: held tasks and the mode's status, from hand-made
TaskHeld and StepMode records (no kernel, no cluster)."""

from __future__ import annotations

from nbdist import events as ev
from nbdist.jupyter.model import Model


def submitted(t: float, tid: str) -> ev.TaskSubmitted:
    return ev.TaskSubmitted(t, tid, "add", (), (f"{tid}.r",), None, None, "cell-1")


def test_held_tasks_are_marked_until_released_or_started() -> None:
    model = Model()
    model.apply([submitted(1.0, "a"), submitted(1.1, "b"),
                 ev.StepMode(1.2, True, 0), ev.TaskHeld(1.3, "a", "add"),
                 ev.TaskHeld(1.4, "b", "add")])
    snap = model.snapshot()
    assert snap["step"] == {"on": True, "held": 2}
    assert [snap["tasks"][t].get("held") for t in ("a", "b")] == [True, True]
    model.take_delta()
    model.apply([ev.StepMode(2.0, True, 1, ("a",))])
    delta = model.take_delta()
    assert delta is not None and delta["step"] == {"on": True, "held": 1}
    assert delta["tasks"]["a"].get("held") is False and "b" not in delta["tasks"]
    model.apply([ev.TaskStarted(2.1, "b", "add", "n1", 7)])
    delta = model.take_delta()
    assert delta is not None and delta["tasks"]["b"].get("held") is False
    assert "step" not in delta  # unchanged: not repeated


def test_the_mode_off_shows_nothing_held() -> None:
    model = Model()
    model.apply([submitted(1.0, "a"), ev.TaskStarted(1.1, "a", "add", "n1", 7)])
    snap = model.snapshot()
    assert snap["step"] == {"on": False, "held": 0}
    assert snap["tasks"]["a"].get("held") is False

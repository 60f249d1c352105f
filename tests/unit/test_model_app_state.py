"""The panel model carries the application metrics and placement groups the bridge reads:
whole lists in every snapshot once there are some, and in a delta only when they changed."""

from __future__ import annotations

from nbdist.jupyter import schema
from nbdist.jupyter.model import Model

COUNTER: schema.AppMetric = {"name": "requests", "kind": "counter", "description": "",
                             "tags": {"route": "/a"}, "value": 3.0}
GROUP: schema.PlacementGroup = {"id": "ab12", "name": "trainers", "strategy": "PACK",
                                "state": "CREATED", "bundles": [{"CPU": 1.0}]}


def test_a_change_goes_in_the_next_delta_once_and_in_every_snapshot() -> None:
    model = Model()
    assert "metrics" not in model.snapshot()
    model.take_delta()
    model.set_app_state([COUNTER], [GROUP])
    delta = model.take_delta()
    assert delta is not None and delta["type"] == "delta"
    assert (delta["metrics"], delta["placement_groups"]) == ([COUNTER], [GROUP])
    model.set_app_state([dict(COUNTER)], [dict(GROUP)])  # type: ignore[list-item]  # same
    assert model.take_delta() is None
    snap = model.snapshot()
    assert (snap["metrics"], snap["placement_groups"]) == ([COUNTER], [GROUP])

    model.set_app_state([{**COUNTER, "value": 4.0}], [GROUP])
    delta = model.take_delta()
    assert delta is not None and delta["metrics"][0]["value"] == 4.0  # type: ignore[typeddict-item]


def test_lists_that_empty_are_sent_empty() -> None:
    model = Model()
    model.set_app_state([COUNTER], [])
    model.take_delta()
    model.set_app_state([], [])
    delta = model.take_delta()
    assert delta is not None and delta["metrics"] == [] and delta["placement_groups"] == []
    assert "metrics" not in model.snapshot()

"""Library runs in the panel's model: RunUpdate records folded into runs of members with their
last metrics, bounded learning curves and marks, sent whole in snapshots and as news in deltas."""

from __future__ import annotations

from nbdist import events as ev
from nbdist.jupyter import schema
from nbdist.jupyter.model import Model
from nbdist.jupyter.runs import RunsFold


def update(member: str, iteration: int, loss: float | None = None, status: str = "RUNNING",
           note: str = "", run: str = "search", library: str = "tune",
           t: float = 1.0) -> ev.RunUpdate:
    metrics = (("loss", loss), ("time_this_iter_s", 0.1)) if loss is not None else ()
    return ev.RunUpdate(t + iteration, library, run, member, status, iteration, metrics,
                        (("lr", "0.01"),), note)


def _check(record: dict, td: type) -> None:
    required = set(td.__required_keys__)  # type: ignore[attr-defined]
    optional = set(td.__optional_keys__)  # type: ignore[attr-defined]
    assert required <= set(record) <= required | optional, (td.__name__, set(record))


def test_a_snapshot_holds_each_trials_row_curve_and_the_point_a_scheduler_stopped_it() -> None:
    model = Model()
    model.apply([update("t1", i, 1.0 / i) for i in range(1, 4)]
                + [update("t2", i, 2.0 / i) for i in range(1, 3)]
                + [update("t2", 2, None, "TERMINATED", "stopped by AsyncHyperBandScheduler")])
    snap = model.snapshot()
    _check(dict(snap), schema.Snapshot)
    run = snap["runs"]["tune:search"]
    _check(dict(run), schema.Run)
    assert run["library"] == "tune" and run["name"] == "search"
    assert run["metrics"] == ["loss"]  # time_this_iter_s is bookkeeping: no curve
    t1, t2 = run["members"]["t1"], run["members"]["t2"]
    _check(dict(t1), schema.RunMember)
    assert (t1["status"], t1["iteration"], t1["metrics"]["loss"]) == ("RUNNING", 3, 1 / 3)
    assert t1["config"] == {"lr": "0.01"}
    assert [p[1:] for p in t1["curves"]["loss"]] == [[1, 1.0], [2, 0.5], [3, 1 / 3]]
    assert t1["marks"] == []
    assert t2["status"] == "TERMINATED"
    assert t2["marks"] == [[3, 2, "stopped", "stopped by AsyncHyperBandScheduler"]]
    # The stopping record carries no metrics: the member keeps its last ones.
    assert t2["metrics"]["loss"] == 1.0


def test_deltas_carry_only_the_members_that_changed_and_only_their_new_points() -> None:
    model = Model()
    model.apply([update("t1", i, float(i)) for i in range(1, 6)] + [update("t2", 1, 9.0)])
    first = model.take_delta()
    assert first is not None and len(first["runs"]["tune:search"]["members"]["t1"]
                                     ["curves"]["loss"]) == 5
    assert model.take_delta() is None  # nothing new: no message at all
    model.apply([update("t1", 6, 6.0)])
    delta = model.take_delta()
    assert delta is not None and delta["type"] == "delta"
    members = delta["runs"]["tune:search"]["members"]
    assert list(members) == ["t1"]
    assert members["t1"]["curves"]["loss"] == [[6, 6, 6.0]]
    assert members["t1"]["reports"] == 6
    # A snapshot still holds the whole (bounded) history.
    assert len(model.snapshot()["runs"]["tune:search"]["members"]["t1"]["curves"]["loss"]) == 6


def test_a_long_curve_is_thinned_to_its_bound_and_still_spans_the_run() -> None:
    model = Model()
    model.runs = fold = RunsFold(max_points=100)
    model._handlers[ev.RunUpdate] = fold.apply
    sent = 0
    for i in range(1, 10_001):
        model.apply([update("t1", i, 1.0 / i)])
        if i % 250 == 0:
            delta = model.take_delta()
            assert delta is not None
            sent += len(delta["runs"]["tune:search"]["members"]["t1"]["curves"]["loss"])
    points = model.snapshot()["runs"]["tune:search"]["members"]["t1"]["curves"]["loss"]
    assert 50 <= len(points) <= 100
    iterations = [p[1] for p in points]
    assert iterations[0] == 1 and iterations[-1] > 9_500
    assert iterations == sorted(iterations)
    assert sent < 1_000  # news only: never the whole history every tick


def test_checkpoints_restarts_and_errors_are_marked_for_train_workers() -> None:
    model = Model()
    model.apply([
        update("rank 0", 1, 0.9, library="train", run="fit"),
        update("rank 0", 2, 0.8, note="checkpoint saved", library="train", run="fit"),
        update("rank 0", 2, None, "RESTARTING", "worker died; restart 1 from checkpoint",
               library="train", run="fit"),
        update("rank 1", 2, None, "ERROR", "RuntimeError: boom", library="train", run="fit"),
    ])
    members = model.snapshot()["runs"]["train:fit"]["members"]
    assert [m[2] for m in members["rank 0"]["marks"]] == ["checkpoint", "restart"]
    assert [m[2] for m in members["rank 1"]["marks"]] == ["error"]


def test_old_runs_age_out_and_are_reported_removed() -> None:
    model = Model()
    model.runs = fold = RunsFold(max_runs=2)
    model._handlers[ev.RunUpdate] = fold.apply
    model.apply([update("t", 1, 1.0, run="a", t=1), update("t", 1, 1.0, run="b", t=2)])
    model.take_delta()
    model.apply([update("t", 1, 1.0, run="c", t=3)])
    delta = model.take_delta()
    assert delta is not None and delta["type"] == "delta"
    assert delta.get("runs_removed") == ["tune:a"]
    assert set(model.snapshot()["runs"]) == {"tune:b", "tune:c"}


def test_a_change_of_status_that_repeats_the_last_numbers_adds_no_point() -> None:
    model = Model()
    model.apply([update("t1", 1, 0.5), update("t1", 2, 0.25),
                 update("t1", 2, 0.25, "TERMINATED", "stopped by ASHA")])
    member = model.snapshot()["runs"]["tune:search"]["members"]["t1"]
    assert [p[1] for p in member["curves"]["loss"]] == [1, 2]
    assert member["marks"] == [[3, 2, "stopped", "stopped by ASHA"]]

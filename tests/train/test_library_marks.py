"""The calls nbdist's libraries make are marked on the event stream (``TaskSubmitted.
library_call``, `nbdist.events.marks`): a Tune search's and a Train run's own calls (actor
creation, polls, info, setup, teardown, placement-group checks) are "control" calls of the run,
and the call that runs the user's code is the "work" of its trial or rank. Real searches and
runs on one 2-CPU cluster; the user's own calls stay unmarked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import nbdist
from nbdist import events, train, tune

pytestmark = pytest.mark.timeout(240)


def records_during(action: Any) -> tuple[Any, list[Any]]:
    """``action()``'s value and the records published while it ran (the driver publishes its
    own submissions and waits as it makes them, so all are in the history on return)."""
    before = {id(item) for item in events.recent(raw=True)}
    value = action()
    return value, [events.build(item) for item in events.recent(raw=True)
                   if id(item) not in before]


def submissions_during(action: Any) -> tuple[Any, list[events.TaskSubmitted]]:
    value, after = records_during(action)
    return value, [e for e in after if isinstance(e, events.TaskSubmitted)]


def trial(config: dict[str, Any]) -> None:
    for step in range(3):
        tune.report({"score": config["x"] * step})


def test_a_tune_search_marks_its_trials_work_and_its_own_calls(cluster: None,
                                                              tmp_path: Path) -> None:
    tuner = tune.Tuner(trial, param_space={"x": tune.grid_search([1, 2])},
                       run_config=tune.RunConfig(name="marks", storage_path=str(tmp_path),
                                                 verbose=0))
    results, records = records_during(tuner.fit)
    submitted = [e for e in records if isinstance(e, events.TaskSubmitted)]
    # The search's own waits on its trials are Tune's too.
    waits = [e for e in records if isinstance(e, events.WaitBegun)]
    assert waits and all(w.library_call and w.library_call[0] == "tune" for w in waits)
    trial_ids = {r.metrics["trial_id"] for r in results}
    assert len(trial_ids) == 2
    assert submitted and all(e.library_call is not None for e in submitted), [
        e.name for e in submitted if e.library_call is None]
    marks = [events.LibraryCall(*e.library_call) for e in submitted]  # type: ignore[misc]
    assert {m.library for m in marks} == {"tune"}
    runs = {m.run for m in marks}
    assert len(runs) == 1 and next(iter(runs)).startswith("marks")
    work = [(e.name, m) for e, m in zip(submitted, marks, strict=True) if m.role == "work"]
    assert {m.member for _, m in work} == trial_ids  # each trial's run, as that trial
    assert all(name.endswith(".run") for name, _ in work)
    polls = [m for e, m in zip(submitted, marks, strict=True) if e.name.endswith(".poll")]
    assert polls and all(m.role == "control" and m.member in trial_ids for m in polls)
    created = [m for e, m in zip(submitted, marks, strict=True) if e.name.endswith("__init__")]
    assert created and all(m.role == "control" for m in created)


def ranks(config: dict[str, Any]) -> None:
    for step in range(2):
        train.report({"step": step, "rank": train.get_context().get_world_rank()})


def test_a_training_run_marks_each_ranks_loop_and_its_own_calls(cluster: None,
                                                               tmp_path: Path) -> None:
    @nbdist.remote
    def users_own(x: int) -> int:
        return x

    trainer = train.DataParallelTrainer(
        ranks, scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name="marked-run", storage_path=str(tmp_path)))
    result, submitted = submissions_during(trainer.fit)
    assert result.error is None
    _, mine = submissions_during(lambda: nbdist.get(users_own.remote(1)))
    assert [e.library_call for e in mine] == [None]
    unmarked = [e.name for e in submitted if e.library_call is None]
    assert not unmarked, unmarked
    marks = {e.task_id: (e.name, events.LibraryCall(*e.library_call))  # type: ignore[misc]
             for e in submitted}
    assert {m.library for _, m in marks.values()} <= {"train", "placement_group"}
    work = sorted(m.member for name, m in marks.values() if m.role == "work")
    assert work == ["rank 0", "rank 1"]
    assert all(m.run == "marked-run" for _, m in marks.values() if m.role == "work")
    names = {name.rpartition(".")[2] for name, m in marks.values() if m.role == "control"}
    assert {"poll", "setup", "info"} <= names, names


def test_a_mark_is_checked_where_it_is_given() -> None:
    @nbdist.remote
    def f() -> None:
        return None

    with pytest.raises(ValueError, match="role"):
        f.options(library_call=("tune", "run", "t1", "chores"))
    with pytest.raises(ValueError, match="library_call"):
        f.options(library_call=42)
    assert f.options(library_call="tune")._mark == events.LibraryCall("tune")


def rank_of() -> int:
    return int(train.get_context().get_world_rank())


def test_the_first_trainer_api_marks_its_calls_and_waits(cluster: None, tmp_path: Path) -> None:
    trainer = train.Trainer(backend=train.BackendConfig(), num_workers=2, logdir=str(tmp_path))

    def whole_run() -> list[Any]:
        trainer.start()
        try:
            return trainer.run(rank_of)
        finally:
            trainer.shutdown()

    ranks, records = records_during(whole_run)
    assert ranks == [0, 1]
    submitted = [e for e in records if isinstance(e, events.TaskSubmitted)]
    waits = [e for e in records if isinstance(e, events.WaitBegun)]
    assert submitted and waits
    assert all(e.library_call and e.library_call[0] in ("train", "placement_group")
               for e in submitted + waits), [e for e in submitted + waits if not e.library_call]
    work = sorted(e.library_call[2] for e in submitted
                  if e.library_call and e.library_call[3] == "work")
    assert work == ["rank 0", "rank 1"]

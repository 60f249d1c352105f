"""The runner's pieces without a cluster: the trial actor's class run in this process, the
session's decisions, stoppers, resources, checkpoints and the result grid."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from nbdist import tune
from nbdist.tune.execution.trial_actor import TrialActor
from nbdist.tune.experiment.trial import Trial
from nbdist.tune.result_grid import ResultGrid, result_of
from nbdist.tune.stopper import TrialPlateauStopper, make_stopper
from nbdist.tune.trainable.resources import normalize, resources_of


def _spec(trial_id: str, tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {"trial_id": trial_id, "trial_name": f"t_{trial_id}", "config": {"n": 3},
            "trial_dir": str(tmp_path), "experiment_name": "e", "resources": {"CPU": 1.0},
            **extra}


def counts(config: dict[str, Any]) -> None:
    for i in range(config["n"]):
        tune.report({"i": i})


def test_trial_actor_names_its_trial_and_hands_reports_over_in_batches(tmp_path: Path) -> None:
    actor = TrialActor(counts)
    assert repr(actor) == "Trial(idle)"
    results, error, takes = actor.run(_spec("abc_00001", tmp_path))  # none polled: all here
    assert repr(actor) == "Trial(abc_00001)"
    assert [r["i"] for r in results] == [0, 1, 2] and error is None and takes == 0
    assert actor.poll("abc_00001", "", 1.0) == ([], True, None)
    assert [r["training_iteration"] for r in results] == [1, 2, 3]
    assert {r["trial_id"] for r in results} == {"abc_00001"}


def reports_around_a_poll(config: dict[str, Any]) -> None:
    tune.report({"i": 0})
    config["polled"].wait(10)
    tune.report({"i": 1})
    tune.report({"i": 2})


def test_a_runs_reply_holds_every_report_no_poll_took_and_counts_the_polls_that_took_some(
        tmp_path: Path) -> None:
    """The driver finishes a trial from its run's reply alone when it holds every poll reply
    that took reports (a poll still in flight may never be answered): that reply must carry
    the reports made after the last poll, even when the trial was polled before."""
    polled = threading.Event()
    actor = TrialActor(reports_around_a_poll)
    replies: list[Any] = []
    runner = threading.Thread(target=lambda: replies.append(
        actor.run(_spec("r_1", tmp_path, config={"polled": polled}))))
    runner.start()
    first, done, _ = actor.poll("r_1", "", 10.0)
    polled.set()
    runner.join(10)
    assert [r["i"] for r in first] == [0] and not done
    results, error, takes = replies[0]
    assert [r["i"] for r in results] == [1, 2] and error is None and takes == 1
    assert actor.poll("r_1", "", 1.0) == ([], True, None)  # a late poll adds nothing


def endless(config: dict[str, Any]) -> None:
    while True:
        tune.report({"x": 1})


def test_a_stop_decision_ends_the_trainable_at_its_next_report(tmp_path: Path) -> None:
    actor = TrialActor(endless)
    runner = threading.Thread(target=actor.run, args=(_spec("s_1", tmp_path),))
    runner.start()
    first, done, _ = actor.poll("s_1", "", 10.0)
    assert first and not done
    while not done:
        _, done, error = actor.poll("s_1", "STOP", 10.0)
    runner.join(10)
    assert not runner.is_alive() and error is None


def test_a_resumed_trials_poll_is_answered_by_its_new_run_not_its_ended_one(tmp_path: Path
                                                                           ) -> None:
    actor = TrialActor(endless)
    paused = threading.Thread(target=actor.run, args=(_spec("p_1", tmp_path, run_key="p_1/1"),))
    paused.start()
    done = False
    while not done:
        _, done, _ = actor.poll("p_1/1", "PAUSE", 10.0)
    paused.join(10)
    # Resumed on the same actor: its first poll may reach the actor before its run does.
    answers: list[Any] = []
    poller = threading.Thread(target=lambda: answers.append(actor.poll("p_1/2", "", 10.0)))
    poller.start()
    resumed = threading.Thread(target=actor.run,
                               args=(_spec("p_1", tmp_path, run_key="p_1/2"),))
    resumed.start()
    poller.join(15)
    results, done, error = answers[0]
    assert results and not done and error is None  # the new run's reports; it goes on
    while not done:
        _, done, _ = actor.poll("p_1/2", "STOP", 10.0)
    resumed.join(10)
    assert not resumed.is_alive()


def raises(config: dict[str, Any]) -> None:
    tune.report({"x": 1})
    raise KeyError("missing")


def test_a_raising_trainable_ends_with_its_exception_and_traceback(tmp_path: Path) -> None:
    import cloudpickle

    actor = TrialActor(raises)
    results, error, _ = actor.run(_spec("r_1", tmp_path))
    assert len(results) == 1 and error is not None
    blob, text = error
    assert isinstance(cloudpickle.loads(blob), KeyError) and "in raises" in text


def keywords(config: dict[str, Any]) -> None:
    tune.report(loss=0.5)
    tune.report({"loss": 0.25}, acc=0.9)


def test_report_takes_a_dict_or_keywords(tmp_path: Path) -> None:
    results, _, _ = TrialActor(keywords).run(_spec("k_1", tmp_path))
    assert [(r["loss"], r.get("acc")) for r in results] == [(0.5, None), (0.25, 0.9)]


def seed_style(config: dict[str, Any], reporter: Any) -> None:
    reporter(timesteps_total=5, mean_accuracy=0.5)


def test_reporter_style_trainables_get_a_reporter(tmp_path: Path) -> None:
    actor = TrialActor(seed_style)
    [result], _, _ = actor.run(_spec("l_1", tmp_path))
    assert result["timesteps_total"] == 5 and result["mean_accuracy"] == 0.5


def test_report_outside_a_trial_says_where_it_belongs() -> None:
    with pytest.raises(RuntimeError, match="inside a trial"):
        tune.report({"x": 1})


def test_stoppers() -> None:
    stop = make_stopper({"acc": 0.9, "training_iteration": 5})
    assert not stop("t", {"acc": 0.5, "training_iteration": 1})
    assert stop("t", {"acc": 0.95, "training_iteration": 1})
    assert stop("t", {"acc": 0.1, "training_iteration": 5})
    with pytest.raises(KeyError, match="'acc' is not in the trial's result"):
        stop("t", {"training_iteration": 1})
    assert make_stopper(lambda trial_id, result: result["x"] > 1)("t", {"x": 2})
    plateau = TrialPlateauStopper("m", std=0.01, num_results=3, grace_period=3)
    assert [plateau("t", {"m": v}) for v in (1.0, 0.5, 0.5, 0.5)] == [False, False, False, True]


def test_resources_in_every_form() -> None:
    assert normalize({"cpu": 2, "gpu": 0}) == {"CPU": 2.0, "GPU": 0.0}
    assert resources_of(counts, {}) == ({"CPU": 1.0}, None, "PACK")
    assert resources_of(tune.with_resources(counts, {"cpu": 0.5, "special": 1}), {}) == (
        {"CPU": 0.5, "special": 1.0}, None, "PACK")
    group = tune.PlacementGroupFactory([{"CPU": 1}, {"CPU": 2}], strategy="SPREAD")
    assert resources_of(tune.with_resources(counts, group), {}) == (
        {"CPU": 1.0}, [{"CPU": 1.0}, {"CPU": 2.0}], "SPREAD")
    assert group.required_resources == {"CPU": 3.0}
    by_config = tune.with_resources(counts, lambda config: {"cpu": config["n"]})
    assert resources_of(by_config, {"n": 2})[0] == {"CPU": 2.0}


def test_checkpoint_directories_and_metadata(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "w.txt").write_text("weights")
    checkpoint = tune.Checkpoint.from_directory(tmp_path / "a")
    checkpoint.update_metadata({"epoch": 3})
    copy = checkpoint.to_directory(tmp_path / "b")
    assert Path(copy, "w.txt").read_text() == "weights"
    assert tune.Checkpoint.from_directory(copy).get_metadata() == {"epoch": 3}
    with checkpoint.as_directory() as d:
        assert Path(d, "w.txt").exists()
    with pytest.raises(FileNotFoundError):
        tune.Checkpoint.from_directory(tmp_path / "missing")


def test_result_grid_best_by_scope() -> None:
    trials = []
    for i, curve in enumerate([[1.0, 5.0, 2.0], [3.0, 3.0, 3.0]]):
        trial = Trial(trial_id=f"t{i}", config={"i": i})
        trial.results = [{"m": v, "training_iteration": n + 1, "config": trial.config}
                         for n, v in enumerate(curve)]
        trial.last_result = trial.results[-1]
        trial.status = Trial.TERMINATED
        trials.append(trial)
    grid = ResultGrid([result_of(t) for t in trials], metric="m", mode="max")
    assert grid.get_best_result().config == {"i": 1}
    assert grid.get_best_result(scope="all").config == {"i": 0}
    assert grid.get_best_result(mode="min", scope="last-2-avg").config == {"i": 1}
    assert list(grid.get_dataframe()["config/i"]) == [0, 1]
    assert grid.num_terminated == 2 and grid.errors == []


def test_every_exported_name_resolves_and_the_package_stays_light() -> None:
    import subprocess
    import sys

    for name in tune.__all__:
        assert getattr(tune, name) is not None, name
    code = ("import sys, nbdist.tune.execution.trial_actor\n"
            "heavy = [m for m in ('pandas', 'nbdist.tune.schedulers', 'nbdist.tune.search') "
            "if m in sys.modules]\nprint(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"  # what a trial's process imports to run a trainable

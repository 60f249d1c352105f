"""What programs written for Ray Tune rely on, run on nbdist.tune with real trials.

Each test pins a difference found by running Ray Tune's own example programs with their
``ray`` imports mapped to ``nbdist``: a module or name they import, or behaviour they expect
(a checkpoint asked for through ``should_checkpoint``, a multi-objective searcher behind a
``ConcurrencyLimiter``, the name ``trial_name_creator`` gives a trial).
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import pytest

from nbdist import tune

pytestmark = [pytest.mark.usefixtures("cluster"), pytest.mark.timeout(120)]


class Counter(tune.Trainable):
    """Counts its steps; returns ``should_checkpoint`` at step ``config["save_at"]``."""

    def setup(self, config: dict[str, Any]) -> None:
        self.steps = 0

    def step(self) -> dict[str, Any]:
        self.steps += 1
        return {"steps": self.steps, "should_checkpoint": self.steps == self.config["save_at"]}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "steps.json"), "w") as f:
            json.dump(self.steps, f)

    def load_checkpoint(self, checkpoint: Any) -> None:
        with open(os.path.join(str(checkpoint), "steps.json")) as f:
            self.steps = json.load(f)


def saved_steps(checkpoint: Any) -> int:
    with open(os.path.join(checkpoint.path, "steps.json")) as f:
        return int(json.load(f))


def test_a_step_returning_should_checkpoint_is_checkpointed_then(storage: str) -> None:
    grid = tune.Tuner(
        Counter, param_space={"save_at": 3},
        run_config=tune.RunConfig(name="step_asks", storage_path=storage, verbose=0,
                                  stop={"training_iteration": 5})).fit()
    result = grid[0]
    assert result.error is None
    assert [r["training_iteration"] for _, r in result.best_checkpoints] == [3]
    assert saved_steps(result.best_checkpoints[0][0]) == 3


def test_a_callback_setting_should_checkpoint_gets_a_checkpoint(storage: str) -> None:
    from nbdist.tune.result import SHOULD_CHECKPOINT

    assert SHOULD_CHECKPOINT == "should_checkpoint"

    class AskAtTwo(tune.Callback):
        def on_trial_result(self, iteration: int, trials: list[Any], trial: Any,
                            result: dict[str, Any], **info: Any) -> None:
            if result["training_iteration"] == 2:
                result[SHOULD_CHECKPOINT] = True

    grid = tune.Tuner(
        Counter, param_space={"save_at": 0},
        run_config=tune.RunConfig(name="callback_asks", storage_path=storage, verbose=0,
                                  stop={"training_iteration": 6}, callbacks=[AskAtTwo()])).fit()
    result = grid[0]
    assert result.error is None
    # The trainable runs ahead of the driver, so the checkpoint holds the state of the step
    # at which the request reached it: step 2 or later.
    assert len(result.best_checkpoints) == 1 and result.checkpoint is not None
    assert saved_steps(result.checkpoint) >= 2


def test_the_mock_trainable_of_rays_examples_learns_fails_and_restores(storage: str) -> None:
    from nbdist.tune.utils.mock_trainable import MOCK_ERROR_KEY, MyTrainableClass

    grid = tune.Tuner(
        MyTrainableClass,
        param_space={"width": 4, "height": tune.grid_search([10, 20]), MOCK_ERROR_KEY: True},
        tune_config=tune.TuneConfig(metric="episode_reward_mean", mode="max"),
        run_config=tune.RunConfig(
            name="mock", storage_path=storage, verbose=0, stop={"training_iteration": 4},
            checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1),
            failure_config=tune.FailureConfig(max_failures=1))).fit()
    assert grid.errors == []
    for result in grid:
        height = result.config["height"]
        curve = list(result.metrics_dataframe["episode_reward_mean"])
        # It fails at its second step, restarts from the first step's checkpoint, goes on.
        assert curve == pytest.approx([math.tanh(t / 4) * height for t in range(1, 5)])
    assert grid.get_best_result().config["height"] == 20


def test_a_multi_objective_optuna_search_behind_a_concurrency_limiter(storage: str) -> None:
    pytest.importorskip("optuna")
    from nbdist.tune.search import ConcurrencyLimiter
    from nbdist.tune.search.optuna import OptunaSearch

    def two_scores(config: dict[str, Any]) -> None:
        tune.report({"loss": (config["x"] - 1) ** 2, "gain": config["x"]})

    searcher = ConcurrencyLimiter(OptunaSearch(metric=["loss", "gain"], mode=["min", "max"]),
                                  max_concurrent=2)
    grid = tune.Tuner(
        two_scores, param_space={"x": tune.uniform(0, 2)},
        tune_config=tune.TuneConfig(search_alg=searcher, num_samples=4),
        run_config=tune.RunConfig(name="multi", storage_path=storage, verbose=0)).fit()
    assert len(grid) == 4 and grid.errors == []
    xs = [r.config["x"] for r in grid]
    assert grid.get_best_result("gain", "max").config["x"] == max(xs)


def test_a_searcher_refuses_modes_that_do_not_match_its_metrics() -> None:
    from nbdist.tune.search import Searcher

    with pytest.raises(ValueError, match="as many metrics"):
        Searcher(metric=["loss"], mode=["min", "max"])
    with pytest.raises(ValueError, match="'min', 'max'"):
        Searcher(metric=["loss"], mode=["lowest"])


def test_the_name_from_trial_name_creator_is_the_trials_str(storage: str) -> None:
    seen: list[tuple[str, str]] = []

    class Names(tune.Callback):
        def on_trial_result(self, iteration: int, trials: list[Any], trial: Any,
                            result: dict[str, Any], **info: Any) -> None:
            seen.append((str(trial), trial.trial_id))

    def once(config: dict[str, Any]) -> None:
        tune.report({"name": tune.get_context().get_trial_name()})

    grid = tune.Tuner(
        once, param_space={"x": tune.grid_search([1, 2])},
        tune_config=tune.TuneConfig(trial_name_creator=lambda t: f"custom_{t.trial_id}"),
        run_config=tune.RunConfig(name="names", storage_path=storage, verbose=0,
                                  callbacks=[Names()])).fit()
    assert len(seen) == 2 and all(name == f"custom_{tid}" for name, tid in seen)
    assert {r.metrics["name"] for r in grid} == {name for name, _ in seen}


def test_a_class_trial_stopped_by_a_criterion_checkpoints_the_state_it_reported(
        storage: str) -> None:
    grid = tune.Tuner(
        Counter, param_space={"save_at": 0},
        run_config=tune.RunConfig(
            name="at_end", storage_path=storage, verbose=0, stop={"training_iteration": 3},
            checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True))).fit()
    result = grid[0]
    assert result.metrics["training_iteration"] == 3
    assert result.checkpoint is not None and saved_steps(result.checkpoint) == 3


def test_pb2_imports_as_in_ray_and_says_it_is_not_implemented() -> None:
    from nbdist.tune.schedulers import create_scheduler
    from nbdist.tune.schedulers.pb2 import PB2

    with pytest.raises(NotImplementedError, match="PB2.*PopulationBasedTraining"):
        PB2(time_attr="training_iteration", hyperparam_bounds={"lr": [1e-4, 1e-1]})
    with pytest.raises(NotImplementedError, match="PB2"):
        create_scheduler("pb2", metric="loss", mode="min")

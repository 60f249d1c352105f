"""Ray Tune's older API: the seed's program, ``tune.run`` and its analysis."""

from __future__ import annotations

from typing import Any

import pytest

import nbdist as ray
from nbdist import tune

pytestmark = pytest.mark.timeout(120)


def my_func(config, reporter):  # the seed's trainable, unchanged  # noqa: ANN001, ANN201
    import time

    import numpy as np  # noqa: F401
    i = 0
    while True:
        reporter(timesteps_total=i, mean_accuracy=i ** config["alpha"])
        i += 1
        time.sleep(.01)  # deliberate sleep: the seed's trainable, unchanged


@pytest.mark.usefixtures("own_cluster")
def test_seed_program_runs_unchanged(storage: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The seed stops at mean_accuracy 100, which alpha=0.2 reaches after 10**10 steps; the
    # same program with a reachable target, its storage under the test's directory.
    monkeypatch.setenv("HOME", storage)
    tune.register_trainable('my_func', my_func)
    ray.init()
    trials = tune.run_experiments({
        'my_experiment': {
            'run': 'my_func',
            'resources': {'cpu': 1, 'gpu': 0},
            'stop': {'mean_accuracy': 2},
            'config': {
                'alpha': tune.grid_search([0.2, 0.4, 0.6]),
                'beta': tune.grid_search([1, 2]),
            },
        }
    })
    assert len(trials) == 6 and {t.status for t in trials} == {"TERMINATED"}
    for trial in trials:
        alpha = trial.config["alpha"]
        steps = next(i for i in range(1000) if i ** alpha >= 2)
        assert trial.last_result["timesteps_total"] == steps
        assert trial.last_result["training_iteration"] == steps + 1
    assert sorted((t.config["alpha"], t.config["beta"]) for t in trials) == [
        (a, b) for a in (0.2, 0.4, 0.6) for b in (1, 2)]


def easy(config: dict[str, Any], reporter: Any) -> None:
    for i in range(3):
        reporter(score=config["x"] * i)


@pytest.mark.usefixtures("cluster")
def test_tune_run_returns_an_analysis(storage: str) -> None:
    analysis = tune.run(easy, config={"x": tune.grid_search([1, 3, 2])}, metric="score",
                        mode="max", storage_path=storage, verbose=0,
                        resources_per_trial={"cpu": 1})
    assert analysis.best_config == {"x": 3}
    assert analysis.best_result["score"] == 6
    assert len(analysis.trials) == 3
    frame = analysis.results_df
    assert sorted(frame["config/x"]) == [1, 2, 3] and set(frame["score"]) == {2, 4, 6}
    assert analysis.get_best_config("score", "min") == {"x": 1}


def broken(config: dict[str, Any]) -> None:
    raise RuntimeError("broken trainable")


@pytest.mark.usefixtures("cluster")
def test_tune_run_raises_when_trials_fail(storage: str) -> None:
    with pytest.raises(tune.TuneError, match="trials did not complete"):
        tune.run(broken, storage_path=storage, verbose=0)
    analysis = tune.run(broken, storage_path=storage, verbose=0, raise_on_failed_trial=False)
    assert "broken trainable" in analysis.trials[0].error

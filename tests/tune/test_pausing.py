"""Schedulers that pause and restart trials, run with real trials: HyperBand pauses trials at
its milestones and resumes the kept ones from their checkpoints; PBT restarts a trial from
another's checkpoint with a new config."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from polling import poll

import nbdist
from nbdist import tune

pytestmark = [pytest.mark.usefixtures("cluster"), pytest.mark.timeout(120)]


def train(config: dict[str, Any]) -> None:
    step, w = 0, 0.0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        text = Path(checkpoint.path, "state").read_text().split()
        step, w = int(text[0]), float(text[1])
    while step < 20:
        step += 1
        w += config["lr"]
        with tempfile.TemporaryDirectory() as d:
            Path(d, "state").write_text(f"{step} {w}")
            tune.report({"w": w, "step": step, "lr": config["lr"]},
                        checkpoint=tune.Checkpoint.from_directory(d))


def test_hyperband_pauses_and_resumes_from_checkpoints(storage: str) -> None:
    from nbdist.tune.schedulers import HyperBandScheduler

    notes: list[Any] = []
    lock = threading.Lock()

    def collect(batch: list[Any]) -> None:
        with lock:
            notes.extend(e for e in batch if e.note)

    completed: list[str] = []

    class Completions(tune.Callback):
        def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any,
                              **info: Any) -> None:
            completed.append(trial.trial_id)

    unsubscribe = nbdist.events.subscribe(collect, kinds=["run_update"])
    try:
        grid = tune.Tuner(train, param_space={"lr": tune.grid_search(
            [0.9, 0.1, 0.5, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6])},
            tune_config=tune.TuneConfig(metric="w", mode="max", scheduler=HyperBandScheduler(
                max_t=20, reduction_factor=3)),
            run_config=tune.RunConfig(storage_path=storage, verbose=0,
                                      callbacks=[Completions()])).fit()
        losers = {r.metrics["trial_id"] for r in grid if r.metrics["training_iteration"] < 20}

        def stopped() -> set[str]:
            with lock:
                return {e.member for e in notes if e.note.startswith("stopped by HyperBand")}

        # each trial cut at a milestone, running or paused, is marked stopped by the scheduler
        poll(lambda: losers and losers <= stopped(), what=f"stop notes for {losers}")
    finally:
        unsubscribe()
    assert grid.errors == [] and {r.status for r in grid} == {"TERMINATED"}
    iterations = sorted(r.metrics["training_iteration"] for r in grid)
    assert iterations[0] < 20 and iterations[-1] == 20
    for result in grid:
        # resumed from its own checkpoints: one report per iteration, the state continuous
        frame = result.metrics_dataframe
        n = result.metrics["training_iteration"]
        assert list(frame["training_iteration"]) == list(range(1, n + 1))
        assert list(frame["step"]) == list(range(1, n + 1))
    with lock:
        texts = {e.note for e in notes}
    assert any(t.startswith("paused by HyperBandScheduler at iteration") for t in texts)
    assert any(t.startswith("stopped by HyperBandScheduler") for t in texts)
    assert "checkpoint saved" in texts
    # paused losers are ended through the controller's stop_trial: completed like any other
    # trial (callbacks, searcher, storage), each exactly once
    assert sorted(completed) == sorted(r.metrics["trial_id"] for r in grid)


def test_pbt_restarts_trials_from_better_ones(storage: str) -> None:
    from nbdist.tune.schedulers import PopulationBasedTraining

    pbt = PopulationBasedTraining(
        time_attr="training_iteration", perturbation_interval=4, quantile_fraction=0.5,
        hyperparam_mutations={"lr": [0.05, 0.1, 1.0, 2.0]})
    grid = tune.Tuner(train, param_space={"lr": tune.grid_search([0.05, 0.1, 1.0, 2.0])},
                      tune_config=tune.TuneConfig(metric="w", mode="max", scheduler=pbt),
                      run_config=tune.RunConfig(storage_path=storage, verbose=0)).fit()
    assert grid.errors == [] and {r.status for r in grid} == {"TERMINATED"}
    exploited = [r for r in grid if r.metrics_dataframe["lr"].nunique() > 1]
    assert exploited, "no trial was restarted with another config"
    for result in exploited:
        frame = result.metrics_dataframe
        switch = int((frame["lr"] != frame["lr"].iloc[0]).idxmax())
        # it continued from a donor's state: w jumps to another trial's curve
        donor_w = frame["w"].iloc[switch] - frame["lr"].iloc[switch]
        assert donor_w > frame["w"].iloc[switch - 1]
        assert result.config["lr"] == frame["lr"].iloc[-1]

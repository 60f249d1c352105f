"""``nbdist.air.session`` (Ray AIR's session functions) in a real training run and a real Tune
trial: ``report`` and the ranks reach the run as Train's and Tune's own functions do."""

from __future__ import annotations

from pathlib import Path

import pytest

import nbdist
from nbdist import air, tune
from nbdist.air import session
from nbdist.train import DataParallelTrainer

pytestmark = pytest.mark.timeout(240)


def report_ranks(config: dict) -> None:
    for step in range(2):
        session.report({"step": step, "rank": session.get_world_rank(),
                        "size": session.get_world_size(),
                        "resumed": session.get_checkpoint() is not None})


def test_session_report_in_a_training_run(cluster: None, tmp_path: Path) -> None:
    trainer = DataParallelTrainer(
        report_ranks, scaling_config=air.ScalingConfig(num_workers=2),
        run_config=air.RunConfig(name="air_session", storage_path=str(tmp_path)))
    result = trainer.fit()
    assert result.error is None
    assert (result.metrics["step"], result.metrics["rank"], result.metrics["size"]) == (1, 0, 2)
    assert result.metrics["resumed"] is False


def trial(config: dict) -> None:
    session.report({"score": config["x"] * 2})


def test_session_report_in_a_tune_trial(cluster: None, tmp_path: Path) -> None:
    tuner = tune.Tuner(trial, param_space={"x": tune.grid_search([1, 2])},
                       run_config=air.RunConfig(storage_path=str(tmp_path)))
    results = tuner.fit()
    assert sorted(r.metrics["score"] for r in results) == [2, 4]
    assert nbdist.is_initialized()

"""A trainer run as a Tune trial (Ray 2.60's pattern: ``fit()`` inside a function trainable):
rank 0's reports become the trial's results and its checkpoints the trial's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nbdist import train, tune

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("cluster")]


def train_loop(config: dict[str, Any]) -> None:
    import tempfile

    for step in range(3):
        checkpoint = None
        if train.get_context().get_world_rank() == 0:
            checkpoint = train.Checkpoint.from_directory(tempfile.mkdtemp())
        train.report({"score": config["lr"] * (step + 1), "step": step}, checkpoint=checkpoint)


def train_driver(config: dict[str, Any]) -> None:
    trainer = train.DataParallelTrainer(
        train_loop, train_loop_config=config,
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name=f"lr-{config['lr']}",
                                   storage_path=config["storage"]))
    trainer.fit()


def test_a_trainer_runs_as_a_tune_trial(tmp_path: Path) -> None:
    tuner = tune.Tuner(
        tune.with_resources(train_driver, {"cpu": 0}),
        param_space={"lr": tune.grid_search([0.1, 1.0]), "storage": str(tmp_path / "train")},
        tune_config=tune.TuneConfig(metric="score", mode="max", max_concurrent_trials=1),
        run_config=tune.RunConfig(name="search", storage_path=str(tmp_path / "tune")))
    grid = tuner.fit()
    assert not grid.errors
    best = grid.get_best_result()
    assert best.config["lr"] == 1.0
    assert best.metrics["score"] == 3.0 and best.metrics["step"] == 2
    assert sorted(r.metrics["score"] for r in grid) == [pytest.approx(0.3), 3.0]
    assert best.checkpoint is not None
    assert sorted(p.name for p in (tmp_path / "train").iterdir()) == ["lr-0.1", "lr-1.0"]

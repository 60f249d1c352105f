"""nbdist.tune unchanged on ``nbdist.init(backend="ray")``: trials are Ray actors, reports and
decisions travel the same way, and Ray's own Tune imports beside it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

import nbdist
from nbdist import tune

pytestmark = pytest.mark.timeout(240)
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    if nbdist.is_initialized():
        nbdist.shutdown()
    nbdist.init(backend="ray", num_cpus=2)
    try:
        yield
    finally:
        nbdist.shutdown()


def curve(config: dict[str, Any]) -> None:
    import tempfile
    from pathlib import Path

    for step in range(1, 9):
        with tempfile.TemporaryDirectory() as d:
            Path(d, "step").write_text(str(step))
            tune.report({"acc": config["q"] * step, "pid": os.getpid()},
                        checkpoint=tune.Checkpoint.from_directory(d))
        if config["q"] == 0:
            raise ValueError("q=0 fails")


@pytest.mark.usefixtures("ray_cluster")
def test_search_with_scheduler_and_failure_on_ray(tmp_path: Any) -> None:
    from nbdist import events
    from nbdist.tune.schedulers import ASHAScheduler

    before = {id(item) for item in events.recent(raw=True)}
    grid = tune.Tuner(
        curve, param_space={"q": tune.grid_search([1.0, 0.5, 0.25, 0.0])},
        tune_config=tune.TuneConfig(metric="acc", mode="max", scheduler=ASHAScheduler(
            max_t=8, grace_period=2, reduction_factor=2)),
        run_config=tune.RunConfig(storage_path=str(tmp_path), stop={"acc": 6},
                                  verbose=0)).fit()
    by_q = {r.config["q"]: r for r in grid}
    assert by_q[1.0].metrics["training_iteration"] == 6  # the stop criterion
    assert by_q[1.0].checkpoint is not None and os.path.exists(by_q[1.0].checkpoint.path)
    assert isinstance(by_q[0.0].error, tune.TrialError) and "q=0 fails" in str(by_q[0.0].error)
    assert grid.get_best_result().config["q"] == 1.0
    assert os.getpid() not in {r.metrics["pid"] for r in grid if r.metrics.get("pid")}
    # The search's own calls carry Tune's mark on Ray too (set through the public API), each
    # trial's run as that trial's work.
    fresh = [events.build(item) for item in events.recent(raw=True) if id(item) not in before]
    submitted = [e for e in fresh if isinstance(e, events.TaskSubmitted)]
    assert submitted and all(e.library_call and e.library_call[0] == "tune" for e in submitted)
    work = {e.library_call[2] for e in submitted if e.library_call[3] == "work"}
    assert work == {r.metrics["trial_id"] for r in grid if r.metrics.get("trial_id")}


def test_ray_tune_imports_beside_nbdist_tune() -> None:
    import ray.tune  # needs the `ray` extra's fsspec and friends

    assert ray.tune.Tuner is not tune.Tuner

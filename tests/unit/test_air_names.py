"""``nbdist.air``: Ray 2.60's ``ray.air`` names are Train's own objects, not copies."""

from __future__ import annotations

import pytest

import nbdist.air
from nbdist import train


def test_air_configs_are_trains() -> None:
    for name in ("ScalingConfig", "FailureConfig", "CheckpointConfig", "Result", "Checkpoint"):
        assert getattr(nbdist.air, name) is getattr(train, name)


def test_air_run_config_is_tunes_and_trains() -> None:
    from nbdist import tune

    config = nbdist.air.RunConfig(name="run", storage_path="/tmp/runs", verbose=0)
    assert isinstance(config, train.RunConfig) and isinstance(config, tune.RunConfig)
    assert (config.name, config.verbose, config.worker_runtime_env) == ("run", 0, None)


def test_keras_callback_is_trains() -> None:
    from nbdist.air.integrations.keras import ReportCheckpointCallback
    from nbdist.train.tensorflow.keras import ReportCheckpointCallback as TrainCallback

    assert ReportCheckpointCallback is TrainCallback


def test_session_outside_a_run_says_where_it_works() -> None:
    from nbdist.air import session

    with pytest.raises(RuntimeError, match="inside a training function"):
        session.report({"loss": 1.0})
    with pytest.raises(RuntimeError, match="inside a training function"):
        session.get_world_rank()

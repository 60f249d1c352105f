"""``nbdist.air``: the names Ray 2.60 still exports from ``ray.air`` (Ray AIR's common configs,
its session functions and the Keras integration), as aliases of ``nbdist.train``'s.

    nbdist.air.RunConfig, ScalingConfig, FailureConfig, CheckpointConfig, Result, Checkpoint
    nbdist.air.session          report / get_checkpoint / get_dataset_shard / ranks
    nbdist.air.integrations.keras.ReportCheckpointCallback

Every name but one is Train's own object, so a script written against ``ray.air`` and one
written against ``ray.train`` share one behaviour. ``RunConfig`` is, as Ray's AIR one, taken by
both trainers and ``tune.Tuner``: a dataclass that is both Tune's and Train's ``RunConfig``
(each field of either, each with its own default).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from nbdist.train import Checkpoint, CheckpointConfig, FailureConfig, Result, ScalingConfig
from nbdist.train.config import RunConfig as _TrainRunConfig
from nbdist.tune.config import RunConfig as _TuneRunConfig


# Tune's and Train's FailureConfig / CheckpointConfig differ as types but have the same fields,
# which both read by name: either kind serves either library.
@dataclass
class RunConfig(_TuneRunConfig, _TrainRunConfig):  # type: ignore[misc]
    """A run's name, storage and policies, for a trainer or a Tuner (Ray's ``air.RunConfig``)."""

_SUBMODULES = ("session", "integrations")


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Checkpoint", "CheckpointConfig", "FailureConfig", "Result", "RunConfig",
           "ScalingConfig"]

"""``nbdist.air``: the names Ray 2.60 still exports from ``ray.air`` (Ray AIR's common configs,
its session functions and the Keras integration), as aliases of ``nbdist.train``'s.

    nbdist.air.RunConfig, ScalingConfig, FailureConfig, CheckpointConfig, Result, Checkpoint
    nbdist.air.session          report / get_checkpoint / get_dataset_shard / ranks
    nbdist.air.integrations.keras.ReportCheckpointCallback

Nothing is implemented here: every name is Train's (or Tune's) own object, so a script written
against ``ray.air`` and one written against ``ray.train`` share one behaviour.
"""

from __future__ import annotations

import importlib
from typing import Any

from nbdist.train import (
    Checkpoint,
    CheckpointConfig,
    FailureConfig,
    Result,
    RunConfig,
    ScalingConfig,
)

_SUBMODULES = ("session", "integrations")


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Checkpoint", "CheckpointConfig", "FailureConfig", "Result", "RunConfig",
           "ScalingConfig"]

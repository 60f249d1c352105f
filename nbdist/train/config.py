"""The configuration records of a training run (Ray Train's names, fields and defaults).

Plain dataclasses: a trainer reads them when ``fit`` starts; nothing here touches a cluster.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

DEFAULT_STORAGE_PATH = os.path.join("~", "nbdist_results")


@dataclass
class ScalingConfig:
    """How many workers, and what each one holds.

    ``resources_per_worker`` uses Ray's keys (``"CPU"``, ``"GPU"``, custom names); by default a
    worker holds one CPU, or one CPU and one GPU with ``use_gpu``. ``placement_strategy`` is the
    placement group's: ``PACK`` (default), ``SPREAD``, ``STRICT_PACK``, ``STRICT_SPREAD``."""

    num_workers: int = 1
    use_gpu: bool = False
    resources_per_worker: dict[str, float] | None = None
    placement_strategy: str = "PACK"

    def __post_init__(self) -> None:
        if self.num_workers < 1:
            raise ValueError(f"ScalingConfig(num_workers={self.num_workers}): a run needs at "
                             "least one worker.")
        if self.placement_strategy not in ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"):
            raise ValueError(f"Unknown placement_strategy {self.placement_strategy!r}: use PACK, "
                             "SPREAD, STRICT_PACK or STRICT_SPREAD.")

    def worker_resources(self) -> dict[str, float]:
        """The bundle one worker reserves, in Ray's resource names."""
        if self.resources_per_worker is not None:
            res = {k: float(v) for k, v in self.resources_per_worker.items() if v}
        else:
            res = {"CPU": 1.0}
        if self.use_gpu and not res.get("GPU"):
            res["GPU"] = 1.0
        return res

    @property
    def num_gpus_per_worker(self) -> float:
        return self.worker_resources().get("GPU", 0.0)


@dataclass
class CheckpointConfig:
    """Which reported checkpoints are kept: all (``num_to_keep=None``) or the best
    ``num_to_keep`` by ``checkpoint_score_attribute`` (the most recent when it is None); the
    latest checkpoint is always kept, so a restart can resume from it."""

    num_to_keep: int | None = None
    checkpoint_score_attribute: str | None = None
    checkpoint_score_order: str = "max"

    def __post_init__(self) -> None:
        if self.num_to_keep is not None and self.num_to_keep < 1:
            raise ValueError(f"CheckpointConfig(num_to_keep={self.num_to_keep}): keep at least "
                             "one checkpoint, or None to keep all.")
        if self.checkpoint_score_order not in ("max", "min"):
            raise ValueError("checkpoint_score_order must be 'max' or 'min', not "
                             f"{self.checkpoint_score_order!r}.")


@dataclass
class FailureConfig:
    """How many times the worker group is restarted after a failure (``-1``: no limit)."""

    max_failures: int = 0


@dataclass
class RunConfig:
    """Where a run keeps its checkpoints (``storage_path/name``) and how it handles failures."""

    name: str | None = None
    storage_path: str | None = None
    failure_config: FailureConfig | None = None
    checkpoint_config: CheckpointConfig | None = None

    def resolved_storage_path(self) -> str:
        return os.path.abspath(os.path.expanduser(self.storage_path or DEFAULT_STORAGE_PATH))

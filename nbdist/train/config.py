"""The configuration records of a training run (Ray Train's names, fields and defaults).

Plain dataclasses: a trainer reads them when ``fit`` starts; nothing here touches a cluster.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

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
    # Ray's driver-side resources: the driver here is the caller's own process, so they
    # reserve nothing; kept so configurations written for Ray construct unchanged.
    trainer_resources: dict[str, float] | None = None
    accelerator_type: str | None = None
    use_tpu: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.num_workers, (tuple, list)):
            raise NotImplementedError(
                f"ScalingConfig(num_workers={self.num_workers!r}): elastic training (a range "
                "of workers) is not supported; give a fixed number.")
        if self.use_tpu:
            raise NotImplementedError("ScalingConfig(use_tpu=True): TPUs are not supported.")
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
        if self.accelerator_type:
            # Ray's resource name for "a node with this accelerator".
            res[f"accelerator_type:{self.accelerator_type}"] = 0.001
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
    # Ray's settings for class trainers that save on their own; a training function decides
    # when to checkpoint itself, so these change nothing (as in Ray Train v2).
    checkpoint_frequency: int = 0
    checkpoint_at_end: bool | None = None

    def __post_init__(self) -> None:
        if self.num_to_keep is not None and self.num_to_keep < 1:
            raise ValueError(f"CheckpointConfig(num_to_keep={self.num_to_keep}): keep at least "
                             "one checkpoint, or None to keep all.")
        if self.checkpoint_score_order not in ("max", "min"):
            raise ValueError("checkpoint_score_order must be 'max' or 'min', not "
                             f"{self.checkpoint_score_order!r}.")


@dataclass
class FailureConfig:
    """How many times the worker group is restarted after a failure (``-1``: no limit).

    The preemption fields are Ray's, for nodes that announce their reclaim (spot instances):
    nbdist's nodes announce none, so a lost node counts against ``max_failures`` and
    ``train.get_preemption_info()`` is always None. ``controller_failure_limit`` is Ray's
    for its controller process; here the controller is the caller's own thread."""

    max_failures: int = 0
    controller_failure_limit: int = -1
    max_preemption_failures: int = -1
    relax_collectives_on_preemption: bool = False
    preemption_grace_s: float = 0.0


@dataclass
class RunConfig:
    """Where a run keeps its checkpoints (``storage_path/name``) and how it handles failures.

    ``callbacks``: objects with Ray's ``UserCallback`` methods, called in the driver:
    ``after_report(run_context, metrics, checkpoint)`` once every rank has made a report
    (``metrics[i]`` is rank i's) and ``after_exception(run_context, worker_exceptions)`` when
    workers fail. ``worker_runtime_env``: only ``{"env_vars": {...}}``, set in each worker
    for the run. ``storage_path`` is a local (or shared) directory: no cloud storage."""

    name: str | None = None
    storage_path: str | None = None
    failure_config: FailureConfig | None = None
    checkpoint_config: CheckpointConfig | None = None
    storage_filesystem: Any = None
    callbacks: list[Any] | None = None
    worker_runtime_env: dict[str, Any] | None = None
    logging_config: Any = None

    def check(self) -> None:
        """Raise for what a run here cannot do (checked by ``fit``, as Ray checks storage
        when the run starts, so a RunConfig naming a bucket still constructs)."""
        path = str(self.storage_path or "")
        if "://" in path and not path.startswith("file://"):
            raise NotImplementedError(
                f"RunConfig(storage_path={path!r}): {path.split('://', 1)[0]}:// storage is "
                "not supported; give a local or shared directory.")
        if self.storage_filesystem is not None:
            raise NotImplementedError("RunConfig(storage_filesystem=...): only the local "
                                      "file system is supported.")
        extra = set(self.worker_runtime_env or {}) - {"env_vars"}
        if extra:
            raise NotImplementedError(f"RunConfig(worker_runtime_env=...): {sorted(extra)} "
                                      "not supported; only env_vars.")

    def resolved_storage_path(self) -> str:
        path = str(self.storage_path or DEFAULT_STORAGE_PATH)
        if path.startswith("file://"):
            path = path[len("file://"):]
        return os.path.abspath(os.path.expanduser(path))

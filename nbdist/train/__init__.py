"""``nbdist.train``: Ray Train's API on nbdist (``from nbdist import train``).

Data-parallel training from a notebook: a trainer starts a gang of worker actors, runs the
user's training function on each with its framework set up (PyTorch DDP over gloo or nccl,
TensorFlow's MultiWorkerMirroredStrategy through ``TF_CONFIG``), follows what the function
reports (a report is a step of the whole group), keeps checkpoints, and restarts the whole
group after a worker dies. Built on nbdist's public API only, so it runs the same on
``nbdist.init(backend="ray")``.

    config.py              ScalingConfig, RunConfig, CheckpointConfig, FailureConfig
    context.py             report, get_context, get_checkpoint, get_dataset_shard (in workers)
    worker_group.py        the gang of TrainWorker actors and its start, set-up and kill
    worker_pool.py         idle workers of clean runs, kept for the driver's next fit()
    controller.py          fit()'s loop: reports, checkpoints, restarts, RunUpdate events
    checkpoint_manager.py  which checkpoints are kept (CheckpointConfig's rules)
    storage.py             a round's checkpoint files: staged by the ranks, committed by the driver
    trainer.py             DataParallelTrainer
    data_config.py         DataConfig: which datasets each rank gets split or whole
    result.py, errors.py   Result; TrainingFailedError and its kinds
    backend.py             BackendConfig: what a framework adds to each worker
    callback.py            UserCallback: the driver-side hooks of RunConfig(callbacks=...)
    torch/, tensorflow/    TorchTrainer (prepare_model, ...), TensorflowTrainer
    v2/, data_parallel_trainer.py   Ray's module paths (ray.train.v2.api...), same objects
    legacy.py              Trainer(backend=...): start / run / shutdown

``train.torch`` and ``train.tensorflow`` are imported on first use, so ``from nbdist import
train`` imports neither framework.
"""

from __future__ import annotations

import importlib
from typing import Any

from nbdist.tune.checkpoint import Checkpoint

from .backend import BackendConfig
from .callback import UserCallback
from .config import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from .context import (
    CheckpointUploadMode,
    TrainContext,
    get_all_reported_checkpoints,
    get_checkpoint,
    get_context,
    get_dataset_shard,
    get_preemption_info,
    report,
)
from .data_config import DataConfig
from .errors import TrainingFailedError, WorkerGroupError, WorkerGroupStartError
from .legacy import Trainer
from .result import Result
from .trainer import DataParallelTrainer

_SUBPACKAGES = ("torch", "tensorflow", "v2")
# Ray's key for the dataset most runs pass (``datasets={TRAIN_DATASET_KEY: ...}``).
TRAIN_DATASET_KEY = "train"


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "TRAIN_DATASET_KEY",
    "BackendConfig",
    "Checkpoint",
    "CheckpointConfig",
    "CheckpointUploadMode",
    "DataConfig",
    "DataParallelTrainer",
    "FailureConfig",
    "Result",
    "RunConfig",
    "ScalingConfig",
    "TrainContext",
    "Trainer",
    "TrainingFailedError",
    "UserCallback",
    "WorkerGroupError",
    "WorkerGroupStartError",
    "get_all_reported_checkpoints",
    "get_checkpoint",
    "get_context",
    "get_dataset_shard",
    "get_preemption_info",
    "report",
]

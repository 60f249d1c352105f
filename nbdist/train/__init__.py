"""``nbdist.train``: Ray Train's API on nbdist (``from nbdist import train``).

Data-parallel training from a notebook: a trainer starts a gang of worker actors, runs the
user's training function on each with its framework set up (PyTorch DDP over gloo or nccl,
TensorFlow's MultiWorkerMirroredStrategy through ``TF_CONFIG``), follows what the function
reports, keeps checkpoints, and restarts the whole group after a worker dies. Built on
nbdist's public API only, so it runs the same on ``nbdist.init(backend="ray")``.

    config.py              ScalingConfig, RunConfig, CheckpointConfig, FailureConfig
    context.py             report, get_context, get_checkpoint, get_dataset_shard (in workers)
    worker_group.py        the gang of TrainWorker actors and its start, set-up and kill
    worker_pool.py         idle workers of clean runs, kept for the driver's next fit()
    controller.py          fit()'s loop: reports, checkpoints, restarts, RunUpdate events
    checkpoint_manager.py  which checkpoints are kept (CheckpointConfig's rules)
    trainer.py             DataParallelTrainer
    result.py, errors.py   Result; TrainingFailedError and its kinds
    backend.py             BackendConfig: what a framework adds to each worker
    torch/, tensorflow/    TorchTrainer (prepare_model, ...), TensorflowTrainer
    legacy.py              Trainer(backend=...): start / run / shutdown

``train.torch`` and ``train.tensorflow`` are imported on first use, so ``from nbdist import
train`` imports neither framework.
"""

from __future__ import annotations

import importlib
from typing import Any

from nbdist.tune.checkpoint import Checkpoint

from .backend import BackendConfig
from .config import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from .context import TrainContext, get_checkpoint, get_context, get_dataset_shard, report
from .errors import TrainingFailedError, WorkerGroupError, WorkerGroupStartError
from .legacy import Trainer
from .result import Result
from .trainer import DataParallelTrainer

_SUBPACKAGES = ("torch", "tensorflow")


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BackendConfig",
    "Checkpoint",
    "CheckpointConfig",
    "DataParallelTrainer",
    "FailureConfig",
    "Result",
    "RunConfig",
    "ScalingConfig",
    "TrainContext",
    "Trainer",
    "TrainingFailedError",
    "WorkerGroupError",
    "WorkerGroupStartError",
    "get_checkpoint",
    "get_context",
    "get_dataset_shard",
    "report",
]

"""``nbdist.train.torch``: PyTorch DistributedDataParallel training (Ray Train's names).

``TorchTrainer`` starts the group with `TorchConfig` (``MASTER_ADDR``/``MASTER_PORT``/
``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` set, ``init_process_group`` called before the training
function); inside the function, ``prepare_model`` wraps the model in DDP and
``prepare_data_loader`` gives each rank its share of the data.

Importing this package in a driver connected to a cluster (or constructing a ``TorchTrainer``,
when the import came first) starts training workers that import torch at once, for the
driver's first ``fit()`` to take (`worker_group.prewarm`): ``import torch`` costs each new
worker process 2.5-3 s of CPU, which would otherwise fall inside that ``fit()``.
``wait_ready()`` waits until they have imported it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from nbdist.tune.checkpoint import Checkpoint

from .. import worker_group, worker_pool
from ..config import RunConfig, ScalingConfig
from ..trainer import DataParallelTrainer
from .config import TorchConfig
from .train_loop_utils import (
    accelerate,
    backward,
    enable_reproducibility,
    get_device,
    get_devices,
    prepare_data_loader,
    prepare_model,
    prepare_optimizer,
)


class TorchTrainer(DataParallelTrainer):
    """A DataParallelTrainer whose workers form one torch.distributed process group."""

    def __init__(
        self,
        train_loop_per_worker: Callable[..., Any],
        *,
        train_loop_config: dict[str, Any] | None = None,
        torch_config: TorchConfig | None = None,
        scaling_config: ScalingConfig | None = None,
        run_config: RunConfig | None = None,
        datasets: dict[str, Any] | None = None,
        dataset_config: Any = None,
        resume_from_checkpoint: Checkpoint | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(train_loop_per_worker, train_loop_config=train_loop_config,
                         backend_config=torch_config or TorchConfig(),
                         scaling_config=scaling_config, run_config=run_config,
                         datasets=datasets, dataset_config=dataset_config,
                         resume_from_checkpoint=resume_from_checkpoint, metadata=metadata)
        _prewarm()


# The pool's name for TorchConfig's workers (the controller names a backend type this way).
_KIND = f"{TorchConfig.__module__}.{TorchConfig.__qualname__}"
# What TorchConfig.on_start imports; torch.distributed imports torch itself.
_PRELOAD = ("torch.distributed",)


def _prewarm() -> None:
    # Without torch in this environment the workers could not import it either.
    if importlib.util.find_spec("torch") is not None:
        worker_group.prewarm(_KIND, _PRELOAD)


def wait_ready(timeout: float | None = None) -> bool:
    """Wait up to ``timeout`` s (None: no limit) until the training workers prepared for this
    driver's TorchTrainer have imported torch; True when none is still importing (or none was
    prepared: not connected when this package was imported, or preparing is off)."""
    return worker_pool.wait_prepared(_KIND, timeout)


_prewarm()

__all__ = ["TorchConfig", "TorchTrainer", "accelerate", "backward", "enable_reproducibility",
           "get_device", "get_devices", "prepare_data_loader", "prepare_model",
           "prepare_optimizer", "wait_ready"]

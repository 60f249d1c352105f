"""``nbdist.train.torch``: PyTorch DistributedDataParallel training (Ray Train's names).

``TorchTrainer`` starts the group with `TorchConfig` (``MASTER_ADDR``/``MASTER_PORT``/
``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` set, ``init_process_group`` called before the training
function); inside the function, ``prepare_model`` wraps the model in DDP and
``prepare_data_loader`` gives each rank its share of the data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nbdist.tune.checkpoint import Checkpoint

from ..config import RunConfig, ScalingConfig
from ..trainer import DataParallelTrainer
from .config import TorchConfig
from .train_loop_utils import get_device, prepare_data_loader, prepare_model


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
        resume_from_checkpoint: Checkpoint | None = None,
    ) -> None:
        super().__init__(train_loop_per_worker, train_loop_config=train_loop_config,
                         backend_config=torch_config or TorchConfig(),
                         scaling_config=scaling_config, run_config=run_config,
                         datasets=datasets, resume_from_checkpoint=resume_from_checkpoint)


__all__ = ["TorchConfig", "TorchTrainer", "get_device", "prepare_data_loader", "prepare_model"]

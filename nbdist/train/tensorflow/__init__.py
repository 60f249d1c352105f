"""``nbdist.train.tensorflow``: TensorFlow's MultiWorkerMirroredStrategy (Ray Train's names).

Each worker gets ``TF_CONFIG`` (the cluster's worker addresses and its own index) before the
training function runs, so ``tf.distribute.MultiWorkerMirroredStrategy()`` created inside it
finds its peers. TensorFlow is imported by the function, not here. The strategy blocks, and
ignores SIGTERM, while a peer is missing, which is why a failed group is killed with SIGKILL
(`worker_group.WorkerGroup.kill`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from nbdist.tune.checkpoint import Checkpoint

from ..backend import BackendConfig, WorkerInfo
from ..config import RunConfig, ScalingConfig
from ..context import TrainContext
from ..trainer import DataParallelTrainer


@dataclass
class TensorflowConfig(BackendConfig):
    # TensorFlow's collective runtime reads TF_CONFIG once per process: a new group needs
    # new processes.
    reuse_workers: ClassVar[bool] = False

    def worker_env(self, workers: list[WorkerInfo],
                   contexts: list[TrainContext]) -> list[dict[str, str]]:
        addresses = [f"{w.ip}:{w.port}" for w in workers]
        return [{"TF_CONFIG": json.dumps({"cluster": {"worker": addresses},
                                          "task": {"type": "worker", "index": rank}})}
                for rank in range(len(workers))]


class TensorflowTrainer(DataParallelTrainer):
    """A DataParallelTrainer whose workers have ``TF_CONFIG`` set for MultiWorkerMirroredStrategy."""

    def __init__(
        self,
        train_loop_per_worker: Callable[..., Any],
        *,
        train_loop_config: dict[str, Any] | None = None,
        tensorflow_config: TensorflowConfig | None = None,
        scaling_config: ScalingConfig | None = None,
        run_config: RunConfig | None = None,
        datasets: dict[str, Any] | None = None,
        dataset_config: Any = None,
        resume_from_checkpoint: Checkpoint | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(train_loop_per_worker, train_loop_config=train_loop_config,
                         backend_config=tensorflow_config or TensorflowConfig(),
                         scaling_config=scaling_config, run_config=run_config,
                         datasets=datasets, dataset_config=dataset_config,
                         resume_from_checkpoint=resume_from_checkpoint, metadata=metadata)


def prepare_dataset_shard(tf_dataset_shard: Any) -> Any:
    """``tf_dataset_shard`` with TensorFlow's automatic sharding off (it is this worker's
    share already)."""
    from .keras import prepare_dataset_shard as prepare

    return prepare(tf_dataset_shard)


__all__ = ["TensorflowConfig", "TensorflowTrainer", "prepare_dataset_shard"]

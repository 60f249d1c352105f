"""Trainers: ``DataParallelTrainer``, for any framework.

``fit()`` runs the training function on a gang of workers (`worker_group`) under a
`controller.Controller`, which follows their reports, keeps checkpoints and restarts the group
after a failure while ``FailureConfig.max_failures`` allows. Framework trainers
(``TorchTrainer``, ``TensorflowTrainer``) are this class with their `BackendConfig`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nbdist.tune.checkpoint import Checkpoint

from .backend import BackendConfig
from .config import RunConfig, ScalingConfig
from .controller import Controller
from .data_config import DataConfig
from .result import Result


class DataParallelTrainer:
    """Runs ``train_loop_per_worker`` on ``scaling_config.num_workers`` workers at once."""

    def __init__(
        self,
        train_loop_per_worker: Callable[..., Any],
        *,
        train_loop_config: dict[str, Any] | None = None,
        backend_config: BackendConfig | None = None,
        scaling_config: ScalingConfig | None = None,
        run_config: RunConfig | None = None,
        datasets: dict[str, Any] | None = None,
        dataset_config: Any = None,
        resume_from_checkpoint: Checkpoint | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        if dataset_config is not None and not isinstance(dataset_config, DataConfig):
            raise TypeError("dataset_config must be a train.DataConfig, not "
                            f"{type(dataset_config).__name__}.")
        if not callable(train_loop_per_worker):
            raise TypeError("train_loop_per_worker must be a function taking no argument or "
                            f"one (the config), not {type(train_loop_per_worker).__name__}.")
        self.train_loop_per_worker = train_loop_per_worker
        self.train_loop_config = train_loop_config
        self.backend_config = backend_config or BackendConfig()
        self.scaling_config = scaling_config or ScalingConfig()
        self.run_config = run_config or RunConfig()
        self.datasets = dict(datasets or {})
        self.dataset_config = dataset_config or DataConfig()
        self.resume_from_checkpoint = resume_from_checkpoint
        self.metadata = dict(metadata or {})

    @classmethod
    def restore(cls, path: str, *args: Any, **kwargs: Any) -> DataParallelTrainer:
        """Not supported (Ray Train v2 removed it too): start a trainer with the same
        ``RunConfig(name, storage_path)`` and ``resume_from_checkpoint``."""
        raise NotImplementedError(
            f"{cls.__name__}.restore() is not supported: construct the trainer again and pass "
            "resume_from_checkpoint=Result.from_path(path).checkpoint.")

    @classmethod
    def can_restore(cls, path: str, *args: Any, **kwargs: Any) -> bool:
        """Not supported, as ``restore``."""
        raise NotImplementedError(f"{cls.__name__}.can_restore() is not supported; see "
                                  "restore().")

    def fit(self) -> Result:
        """Train; returns the Result, or raises TrainingFailedError once restarts run out.
        An interrupt (KeyboardInterrupt) ends every worker before it propagates."""
        result = Controller(self).run()
        if result.error is not None:
            raise result.error
        return result

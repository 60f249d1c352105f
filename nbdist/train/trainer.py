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
        resume_from_checkpoint: Checkpoint | None = None,
    ) -> None:
        if not callable(train_loop_per_worker):
            raise TypeError("train_loop_per_worker must be a function taking no argument or "
                            f"one (the config), not {type(train_loop_per_worker).__name__}.")
        self.train_loop_per_worker = train_loop_per_worker
        self.train_loop_config = train_loop_config
        self.backend_config = backend_config or BackendConfig()
        self.scaling_config = scaling_config or ScalingConfig()
        self.run_config = run_config or RunConfig()
        self.datasets = dict(datasets or {})
        self.resume_from_checkpoint = resume_from_checkpoint

    def fit(self) -> Result:
        """Train; returns the Result, or raises TrainingFailedError once restarts run out.
        An interrupt (KeyboardInterrupt) ends every worker before it propagates."""
        result = Controller(self).run()
        if result.error is not None:
            raise result.error
        return result

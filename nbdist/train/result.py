"""``Result``: what ``fit()`` returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nbdist.tune.checkpoint import Checkpoint

from .errors import TrainingFailedError


@dataclass
class Result:
    """What ``fit()`` returns: rank 0's last metrics, the latest and the kept checkpoints."""

    metrics: dict[str, Any] | None
    checkpoint: Checkpoint | None
    error: TrainingFailedError | None = None
    path: str = ""
    metrics_dataframe: Any = None
    best_checkpoints: list[tuple[Checkpoint, dict[str, Any]]] = field(default_factory=list)
    return_value: Any = None

    def get_best_checkpoint(self, metric: str, mode: str) -> Checkpoint | None:
        """The kept checkpoint whose metrics have the best ``metric`` (``mode``: max or min)."""
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', not {mode!r}")
        scored = [(m[metric], c) for c, m in self.best_checkpoints if metric in m]
        if not scored:
            return None
        best = (max if mode == "max" else min)(scored, key=lambda pair: pair[0])
        return best[1]

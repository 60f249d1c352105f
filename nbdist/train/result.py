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
    best_checkpoints: list[tuple[Checkpoint, dict[str, Any]]] = field(default_factory=list)
    return_value: Any = None
    history: list[dict[str, Any]] = field(default_factory=list, repr=False)
    _frame: Any = field(default=None, repr=False, compare=False)

    @property
    def metrics_dataframe(self) -> Any:
        """Rank 0's reports, one row each, built once. pandas is imported on first use, not
        by ``fit()``: a driver's first ``import pandas`` takes over a second of CPU."""
        if self._frame is None:
            import pandas

            self._frame = pandas.DataFrame(self.history)
        return self._frame

    def get_best_checkpoint(self, metric: str, mode: str) -> Checkpoint | None:
        """The kept checkpoint whose metrics have the best ``metric`` (``mode``: max or min)."""
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', not {mode!r}")
        scored = [(m[metric], c) for c, m in self.best_checkpoints if metric in m]
        if not scored:
            return None
        best = (max if mode == "max" else min)(scored, key=lambda pair: pair[0])
        return best[1]

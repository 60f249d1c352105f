"""Which of a run's reported checkpoints are kept: a decision over plain data, no I/O.

The driver registers each checkpoint rank 0 reported, with its metrics, in report order; the
manager answers which kept ones are now surplus (their directories are deleted by the caller).
Rules (Ray Train's): with ``num_to_keep=None`` everything is kept; otherwise the best
``num_to_keep`` by ``checkpoint_score_attribute`` in ``checkpoint_score_order`` (the most recent
ones when no attribute is given), plus the latest checkpoint, never dropped since a restart
resumes from it. A report missing the score attribute ranks below every report that has it.
"""

from __future__ import annotations

import math
from typing import Any

from nbdist.tune.checkpoint import Checkpoint

from .config import CheckpointConfig


class CheckpointManager:
    def __init__(self, config: CheckpointConfig | None = None) -> None:
        self.config = config or CheckpointConfig()
        # (report index, checkpoint, metrics), in report order.
        self._kept: list[tuple[int, Checkpoint, dict[str, Any]]] = []

    @property
    def latest(self) -> Checkpoint | None:
        return self._kept[-1][1] if self._kept else None

    @property
    def best_checkpoints(self) -> list[tuple[Checkpoint, dict[str, Any]]]:
        """The kept checkpoints with their metrics, in report order."""
        return [(c, m) for _, c, m in self._kept]

    def register(self, index: int, checkpoint: Checkpoint,
                 metrics: dict[str, Any]) -> list[Checkpoint]:
        """Add a reported checkpoint; returns the ones no longer kept."""
        self._kept.append((index, checkpoint, metrics))
        keep = self.config.num_to_keep
        if keep is None or len(self._kept) <= keep:
            return []
        ranked = sorted(self._kept, key=self._score, reverse=True)
        survivors = {id(k) for k in ranked[:keep]} | {id(self._kept[-1])}
        dropped = [k[1] for k in self._kept if id(k) not in survivors]
        self._kept = [k for k in self._kept if id(k) in survivors]
        return dropped

    def _score(self, kept: tuple[int, Checkpoint, dict[str, Any]]) -> tuple[float, int]:
        index, _, metrics = kept
        attribute = self.config.checkpoint_score_attribute
        if attribute is None:
            return (0.0, index)
        value = metrics.get(attribute)
        if not isinstance(value, (int, float)) or math.isnan(value):
            return (-math.inf, index)
        return (float(value) if self.config.checkpoint_score_order == "max" else -float(value),
                index)

"""``UserCallback``: hooks a run calls in the driver (``RunConfig(callbacks=[...])``), with
Ray Train's names and arguments. Any object with these methods works; subclassing is for
documentation."""

from __future__ import annotations

from typing import Any

from nbdist.tune.checkpoint import Checkpoint


class UserCallback:
    def after_report(self, run_context: Any, metrics: list[dict[str, Any]],
                     checkpoint: Checkpoint | None) -> None:
        """Every rank has made its next report: ``metrics[i]`` is rank i's; ``checkpoint`` is
        the kept one (rank 0's), or None."""

    def after_exception(self, run_context: Any,
                        worker_exceptions: dict[int, BaseException]) -> None:
        """Workers failed: their errors by rank (before a restart, or the end of the run)."""

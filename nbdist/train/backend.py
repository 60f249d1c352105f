"""What a framework adds to a worker group: the environment each worker needs before the
training function runs, and the set-up and tear-down around it (``init_process_group``...).

A `BackendConfig` is built in the driver and pickled to every worker: ``worker_env`` runs in
the driver, once the group's addresses are known; ``on_start`` and ``on_shutdown`` run in each
worker process, in the worker's own thread that runs the training function.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .context import TrainContext


@dataclass(frozen=True)
class WorkerInfo:
    """Where a started worker runs: its node, its host address, its pid and a TCP port that
    was free on its host (for a framework's rendezvous)."""

    node_id: str
    ip: str
    pid: int
    port: int


class BackendConfig:
    """No framework: workers run the function as it is (``DataParallelTrainer``'s default).

    ``reuse_workers``: whether a worker process whose run ended cleanly can serve a later run
    of the same backend type; ``on_shutdown`` must then undo ``on_start``, and a subclass
    whose set-up cannot be undone in a live process sets it to False."""

    reuse_workers: ClassVar[bool] = True

    def worker_env(self, workers: list[WorkerInfo],
                   contexts: list[TrainContext]) -> list[dict[str, str]]:
        """Environment variables for each worker, in rank order."""
        return [{} for _ in workers]

    def on_start(self, context: TrainContext) -> None:
        """Runs in the worker after its environment is set, before the first function."""

    def on_shutdown(self) -> None:
        """Runs in the worker when the group ends normally."""

"""The errors of a training run.

    NbdistError
    └── TrainingFailedError         fit() ran out of restarts, or Trainer.run failed;
        ├── WorkerGroupError        ``worker_failures`` maps each failed rank to its error (the
        │                           user's exception with its traceback, or ActorDiedError for
        │                           a process that died)
        └── WorkerGroupStartError   the group could not start whole (the cluster cannot hold
                                    it, or not within the start timeout)
"""

from __future__ import annotations

from typing import Any

from nbdist.exceptions import ActorDiedError, NbdistError, TaskError


class TrainingFailedError(NbdistError):
    """Training failed and the restarts FailureConfig allows were used up."""

    def __init__(self, message: str, worker_failures: dict[int, BaseException] | None = None):
        super().__init__(message)
        self.worker_failures = dict(worker_failures or {})

    @property
    def cause(self) -> BaseException | None:
        """The failure that explains the others (see `root_rank`)."""
        if not self.worker_failures:
            return None
        return self.worker_failures[root_rank(self.worker_failures)]

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.args[0], self.worker_failures))


class WorkerGroupError(TrainingFailedError):
    """One or more workers of the group failed (Ray Train's name for it)."""


def root_rank(failed: dict[int, BaseException]) -> int:
    """The rank whose failure explains the others: a worker whose process died before one
    that raised (its peers' collectives fail because of it), else the lowest rank."""
    died = [rank for rank, error in failed.items()
            if isinstance(error, ActorDiedError)]
    return min(died or failed)


def describe_failure(rank: int, error: BaseException) -> str:
    """One worker's failure: what happened, then the worker's own traceback when there is one."""
    if isinstance(error, TaskError) and error.remote_traceback:
        cause = error.cause if error.cause is not None else error
        return (f"worker {rank} raised {type(cause).__name__}: {cause}\n"
                f"{error.remote_traceback.rstrip()}")
    return f"worker {rank} failed: {type(error).__name__}: {error}"


class WorkerGroupStartError(TrainingFailedError):
    """The group's workers could not all start (the cluster cannot hold them, or one died)."""

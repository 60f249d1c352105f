"""The training function's side of a run: ``report``, ``get_context``, ``get_checkpoint``,
``get_dataset_shard`` (Ray Train's functions), called inside a worker of the group.

One `Session` per worker process, set by the worker actor (`worker_group.TrainWorker`) before
it calls the training function and cleared after. ``report`` is a step of the whole group, as
in Ray Train: every rank stores the checkpoint it reports (its files go into the round's one
checkpoint directory: `storage`), appends the report to the session's list, which wakes the
actor's ``poll`` that hands reports to the driver, and waits until the driver has committed the
round, which it does once every rank has made that report (`Session.wait_committed`). So no
rank runs more than one report ahead of the slowest, a round whose ``report`` returned on
every rank is never lost, and when a rank dies the others wait in their next report until the
driver ends the attempt. The driver, not the workers, decides which checkpoints are kept.
Checkpoints are numbered by report across restarts (``checkpoint_NNNNNN``). The seed's
``Trainer.run`` has no driver loop: its sessions have no staging directory, and their reports
neither wait nor are committed (files are copied straight to their final directory).
"""

from __future__ import annotations

import enum
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nbdist.tune.checkpoint import Checkpoint

from . import storage


@dataclass(frozen=True)
class TrainContext:
    """Where this worker stands in its group (``train.get_context()``)."""

    world_rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    experiment_name: str
    storage_path: str
    use_gpu: bool = False

    def get_world_rank(self) -> int:
        return self.world_rank

    def get_world_size(self) -> int:
        return self.world_size

    def get_local_rank(self) -> int:
        return self.local_rank

    def get_local_world_size(self) -> int:
        return self.local_world_size

    def get_node_rank(self) -> int:
        return self.node_rank

    def get_experiment_name(self) -> str:
        return self.experiment_name

    def get_trial_name(self) -> str:
        return self.experiment_name

    def get_storage(self) -> str:
        return self.storage_path


@dataclass(frozen=True)
class Report:
    """One ``train.report``: its number in the run, the metrics, where the reported
    checkpoint's files are, and where they go once the round is committed (None when they are
    where they stay: ``NO_UPLOAD``, an upload function, or no commit step)."""

    index: int
    metrics: dict[str, Any]
    checkpoint_path: str | None
    final_path: str | None = None


@dataclass(frozen=True)
class SessionStart:
    """What the driver sends a worker to start a session with (a `Session` holds a lock)."""

    context: TrainContext
    run_dir: str
    next_index: int
    checkpoint: Checkpoint | None
    staging_dir: str | None = None  # None: reports are not committed (the seed's Trainer)


@dataclass
class Session:
    context: TrainContext
    run_dir: str
    next_index: int = 0
    checkpoint: Checkpoint | None = None
    datasets: dict[str, Any] = field(default_factory=dict)
    staging_dir: str | None = None
    reports: list[Report] = field(default_factory=list)
    finished: bool = False
    committed: int = -1  # the last round the driver committed
    committed_path: str | None = None  # that round's checkpoint
    changed: threading.Condition = field(default_factory=threading.Condition)

    def add(self, report: Report) -> None:
        with self.changed:
            self.reports.append(report)
            self.changed.notify_all()

    def finish(self) -> None:
        with self.changed:
            self.finished = True
            self.changed.notify_all()

    def take(self, timeout: float) -> tuple[list[Report], bool]:
        """The reports not taken yet, waiting up to ``timeout`` s for one (or the end)."""
        with self.changed:
            if not self.reports and not self.finished:
                self.changed.wait(timeout)
            taken, self.reports = self.reports, []
            return taken, self.finished

    def commit(self, index: int, path: str | None) -> None:
        """The driver committed round ``index`` (its checkpoint: ``path``)."""
        with self.changed:
            self.committed, self.committed_path = index, path
            self.changed.notify_all()

    def wait_committed(self, index: int) -> str | None:
        """Wait until round ``index`` is committed; returns its checkpoint's path. Without a
        staging directory there is no commit: returns None at once."""
        if self.staging_dir is None:
            return None
        with self.changed:
            self.changed.wait_for(lambda: self.committed >= index)
            return self.committed_path


_session: Session | None = None


def set_session(session: Session | None) -> None:
    global _session
    _session = session


def _current(what: str) -> Session:
    if _session is None:
        raise RuntimeError(
            f"train.{what}() works only inside a training function run by a trainer "
            "(TorchTrainer, TensorflowTrainer, DataParallelTrainer or Trainer.run).")
    return _session


def get_context() -> TrainContext:
    """This worker's rank, world size, local rank, node rank and experiment name."""
    return _current("get_context").context


def get_checkpoint() -> Checkpoint | None:
    """The latest checkpoint: the one this worker last reported (once its round is committed,
    where the round's checkpoint is), else the one to resume from (the latest committed before
    a restart, or the trainer's ``resume_from_checkpoint``); None on a fresh start."""
    return _current("get_checkpoint").checkpoint


def get_dataset_shard(dataset_name: str | None = None) -> Any:
    """This worker's share of a dataset passed to the trainer as ``datasets={name: ...}``."""
    session = _current("get_dataset_shard")
    if dataset_name is None and len(session.datasets) == 1:
        return next(iter(session.datasets.values()))
    if dataset_name not in session.datasets:
        raise KeyError(f"No dataset called {dataset_name!r} was passed to the trainer; it has "
                       f"{sorted(session.datasets)}.")
    return session.datasets[dataset_name]


class CheckpointUploadMode(enum.Enum):
    """How ``report`` stores a checkpoint (Ray's names). ``SYNC``: copied under the run's
    directory before ``report`` returns. ``ASYNC``: the same copy, then the reported directory
    is deleted (Ray uploads in the background and deletes; a local copy is quick enough to
    make in line). ``NO_UPLOAD``: the directory already is where it should stay; it is kept
    where it is."""

    SYNC = "SYNC"
    ASYNC = "ASYNC"
    NO_UPLOAD = "NO_UPLOAD"


def report(metrics: dict[str, Any], checkpoint: Checkpoint | None = None,
           checkpoint_dir_name: str | None = None,
           checkpoint_upload_mode: CheckpointUploadMode = CheckpointUploadMode.SYNC,
           delete_local_checkpoint_after_upload: bool | None = None,
           checkpoint_upload_fn: Callable[[Checkpoint, str], Checkpoint] | None = None,
           validation: Any = False) -> None:
    """Report this step's metrics, and a checkpoint (from any rank: the files of the ranks'
    checkpoints make the round's one checkpoint), then wait until every rank has made this
    report. A round's metrics are rank 0's.

    ``checkpoint_upload_fn(checkpoint, destination)`` replaces the copy: it stores the
    checkpoint at ``destination`` (or elsewhere) and returns the stored one; every rank with a
    checkpoint calls it, with the same ``destination``."""
    session = _current("report")
    if validation:
        raise NotImplementedError("train.report(validation=...): asynchronous validation "
                                  "is not supported; validate in the training function.")
    mode = CheckpointUploadMode(checkpoint_upload_mode)
    index = session.next_index
    session.next_index += 1
    path = final = None
    if checkpoint is not None:
        path, final = _store(session, checkpoint, checkpoint_dir_name or
                             f"checkpoint_{index:06d}", mode, checkpoint_upload_fn)
    delete = delete_local_checkpoint_after_upload
    if delete is None:
        delete = mode is CheckpointUploadMode.ASYNC
    if checkpoint is not None and delete and mode is not CheckpointUploadMode.NO_UPLOAD \
            and checkpoint.path != path:
        shutil.rmtree(checkpoint.path, ignore_errors=True)
    session.add(Report(index, dict(metrics), path, final))
    committed = session.wait_committed(index)
    if path is not None:
        session.checkpoint = Checkpoint(committed or final or path)


def _store(session: Session, checkpoint: Checkpoint, name: str, mode: CheckpointUploadMode,
           upload_fn: Callable[[Checkpoint, str], Checkpoint] | None) -> tuple[str, str | None]:
    """Store a reported checkpoint: where its files are now, and where they go at commit."""
    final = os.path.join(session.run_dir, name)
    if upload_fn is not None:
        return upload_fn(checkpoint, final).path, None
    if mode is CheckpointUploadMode.NO_UPLOAD:
        return checkpoint.path, None
    if session.staging_dir is None:
        storage.copy_files(checkpoint.path, final)
        return final, None
    return storage.stage(checkpoint.path, session.staging_dir, name), final


def get_preemption_info() -> None:
    """Ray's notice that a node of the group is about to be reclaimed (spot instances). No
    nbdist node announces its end, so there is never one: always None (a lost node is a
    failure, restarted under ``FailureConfig.max_failures``). Call it from any rank."""
    _current("get_preemption_info")
    return None


def get_all_reported_checkpoints(*args: Any, **kwargs: Any) -> Any:
    """Not supported: the driver, not the workers, knows which checkpoints are kept."""
    raise NotImplementedError(
        "train.get_all_reported_checkpoints() is not supported: which checkpoints are kept is "
        "known to the driver (Result.best_checkpoints after fit), not inside the workers.")

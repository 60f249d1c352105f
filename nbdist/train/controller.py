"""The driver's loop of a training run: start the gang, follow its reports, keep checkpoints,
restart after failures, publish progress.

One `Controller` per ``fit()``, in the driver's thread. An attempt starts a `WorkerGroup`, calls
``run`` on every worker and long-polls each one (``poll``) for reports while waiting on all
those calls together, so a report, a finished worker and a dead one are each noticed as soon as
they happen; a worker whose function returned but whose poll stays unanswered for ``REPLY_S``
fails the attempt instead of holding ``fit()`` for ever.

Reports come in rounds: report number k of every rank is round k, and each rank's
``train.report`` waits until its round is committed. Once every rank has made report k the
driver commits round k (`_commit`): the ranks' checkpoint files become the round's checkpoint
(`storage.commit`), kept per ``CheckpointConfig``; rank 0's metrics become the run's (and, when
``fit`` runs inside a Tune trial, the trial's report); every rank's progress is published as a
``RunUpdate`` record (``member="rank N"``); then every worker is told, which ends the reports'
wait. A round that not every rank reached is never committed. A rank whose function returned
while others wait in a report it never made fails the attempt (it would wait for ever).

The first failure ends the attempt: the whole group is killed (its peers may be blocked in a
collective, or in a report, waiting for the dead one), the attempt's uncommitted files are
removed, and a new group starts from the last committed checkpoint while
``FailureConfig.max_failures`` allows. Whatever else ends ``run`` (an interrupt included), the
group's processes are killed before it returns or raises; after a clean run they are released
(kept idle for the driver's next run, holding no resources: `worker_pool`).
"""

from __future__ import annotations

import datetime
import logging
import os
import shutil
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import nbdist
from nbdist import events
from nbdist.exceptions import ActorDiedError
from nbdist.tune.checkpoint import Checkpoint

from . import storage
from .checkpoint_manager import CheckpointManager
from .config import FailureConfig, RunConfig, ScalingConfig
from .context import Report, SessionStart
from .errors import WorkerGroupError, describe_failure, root_rank
from .result import Result, write_snapshot
from .worker_group import WORKER_START_TIMEOUT_S, WorkerGroup

if TYPE_CHECKING:
    from .trainer import DataParallelTrainer

logger = logging.getLogger(__name__)

# How long a worker's poll waits for a report before answering empty: bounds how long an
# interrupt or a failure elsewhere can go unnoticed by the loop, not how fast reports arrive.
POLL_S = 0.5
# The driver's own waits end before a notebook would show a progress bar for them (1 s): a
# run's progress is its live view, not a bar per internal wait.
WAIT_S = 0.8
# A worker's poll answers within POLL_S once its training function has returned; one still
# unanswered this long after that means the worker cannot answer (its last reports are out of
# reach): the attempt fails with that, rather than waiting for ever.
REPLY_S = 60.0
# How long a worker group may take to start before the attempt fails (Ray's variable's name).
START_TIMEOUT_ENV = "NBDIST_TRAIN_WORKER_GROUP_START_TIMEOUT_S"


def default_run_name() -> str:
    return "nbdist_train_run-" + datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S_%f")[:-3]


class Controller:
    def __init__(self, trainer: DataParallelTrainer) -> None:
        self.trainer = trainer
        run_config = trainer.run_config
        self.name = run_config.name or default_run_name()
        self.run_dir = os.path.join(run_config.resolved_storage_path(), self.name)
        self.failure_config = run_config.failure_config or FailureConfig()
        self.manager = CheckpointManager(run_config.checkpoint_config)
        self.num_workers = trainer.scaling_config.num_workers
        self.history: list[dict[str, Any]] = []  # rank 0's metrics, one per committed round
        self.iterations = [0] * self.num_workers
        self.last_metrics: list[dict[str, Any]] = [{} for _ in range(self.num_workers)]
        self.start_timeout = float(os.environ.get(START_TIMEOUT_ENV, WORKER_START_TIMEOUT_S))
        self.tune_report = _tune_report()
        self.callbacks = list(run_config.callbacks or [])
        self.run_context = RunContext(run_config, trainer.train_loop_config,
                                      trainer.scaling_config, self.name)
        self.env_vars = {str(k): str(v) for k, v in
                         (run_config.worker_runtime_env or {}).get("env_vars", {}).items()}
        # The reports of rounds not every rank has made yet: round -> rank -> report.
        self.rounds: dict[int, dict[int, Report]] = {}
        # The attempt's group, while the workers may be told of a commit.
        self.group: WorkerGroup | None = None

    def run(self) -> Result:
        self.trainer.run_config.check()
        if not nbdist.is_initialized():
            nbdist.init()
        os.makedirs(self.run_dir, exist_ok=True)
        datasets = nbdist.put(self.trainer.datasets)
        failures = 0
        # The run's view opens in the cell that called fit() before the workers start: its
        # first records are delivered now, and its last ones before fit() returns.
        self._publish_all("PENDING", "")
        events.bus().flush()
        try:
            while True:
                with events.library_call("train", self.name):
                    values, failed = self._attempt(datasets)
                if not failed:
                    self._publish_all("TERMINATED", "")
                    return self._result(return_value=values.get(0))
                failures += 1
                limit = self.failure_config.max_failures
                rank = root_rank(failed)
                if limit != -1 and failures > limit:
                    return self._failed(failed, failures)
                how = "died" if isinstance(failed[rank], ActorDiedError) else "failed"
                self._publish_all("RESTARTING", f"restart {failures} after worker {rank} "
                                  f"{how}: {_short(failed[rank])}")
        except Exception as exc:
            self._publish_all("ERROR", _short(exc))
            raise
        except BaseException as exc:  # an interrupt, or Tune stopping the trial that runs fit
            self._publish_all("ERROR" if isinstance(exc, KeyboardInterrupt) else "TERMINATED",
                              "interrupted" if isinstance(exc, KeyboardInterrupt) else "stopped")
            raise
        finally:
            events.bus().flush()

    def _attempt(self, datasets: Any) -> tuple[dict[int, Any], dict[int, BaseException]]:
        trainer, scaling = self.trainer, self.trainer.scaling_config
        backend = trainer.backend_config
        kind = f"{type(backend).__module__}.{type(backend).__qualname__}"
        reuse = kind if backend.reuse_workers else None
        group = WorkerGroup(self.num_workers, scaling.worker_resources(),
                            scaling.placement_strategy, self.start_timeout, reuse=reuse)
        clean = False
        staging = storage.staging_dir(self.run_dir)
        try:
            contexts = group.contexts(self.name, os.path.dirname(self.run_dir), scaling.use_gpu)
            values, failed = gather(group.setup_refs(contexts, trainer.backend_config,
                                                     self.env_vars))
            if failed:
                return values, failed
            checkpoint = self.manager.latest or trainer.resume_from_checkpoint
            start = len(self.history)
            shards = _rank_datasets(trainer, self.num_workers, datasets,
                                    [info.node_id for info in group.infos])
            self.rounds.clear()  # a failed attempt's unfinished rounds are not resumed
            self._publish_all("RUNNING", "")
            runs = [actor.run.options(library_call=("train", self.name, f"rank {rank}", "work"))
                    .remote(trainer.train_loop_per_worker, trainer.train_loop_config,
                            SessionStart(contexts[rank], self.run_dir, start, checkpoint,
                                         staging), shards[rank])
                    for rank, actor in enumerate(group.actors)]
            self.group = group
            values, failed = self._follow(group, runs)
            if not failed:
                _, failed = gather([a.teardown.remote() for a in group.actors])
                clean = not failed
            return values, failed
        finally:
            self.group = None
            if clean:
                group.release()
            else:
                group.kill()
            storage.discard(staging)

    def _follow(self, group: WorkerGroup,
                runs: list[Any]) -> tuple[dict[int, Any], dict[int, BaseException]]:
        """Wait on every worker's run and poll until all are done or one fails."""
        polls = {rank: self._poll(a, rank) for rank, a in enumerate(group.actors)}
        running = dict(enumerate(runs))
        values: dict[int, Any] = {}
        failed: dict[int, BaseException] = {}
        ended: dict[int, float] = {}  # rank -> when its run returned
        while (running or polls) and not failed:
            watched = [(ref, "poll", r) for r, ref in polls.items()] + \
                      [(ref, "run", r) for r, ref in running.items()]
            ready, _ = nbdist.wait([w[0] for w in watched], num_returns=1, timeout=WAIT_S)
            for ref, kind, rank in watched:
                if ref not in ready:
                    continue
                (polls if kind == "poll" else running).pop(rank)
                try:
                    value = nbdist.get(ref)
                except Exception as exc:
                    failed[rank] = self._cause(exc, running.get(rank))
                    continue
                if kind == "run":
                    values[rank] = value
                    ended[rank] = time.monotonic()
                    continue
                reports, finished = value
                self._take(rank, reports)
                if not finished:
                    polls[rank] = self._poll(group.actors[rank], rank)
            if not failed:
                failed.update(_unanswered(polls, ended))
            if not failed:
                failed.update(self._stranded(values, polls))
        if failed:
            self.group = None  # the group is ended, not told of commits
            self._drain(polls, failed)
            failed.update(_more_failures(running, failed))
            self._call_back("after_exception", dict(failed))
        return values, failed

    def _poll(self, actor: Any, rank: int) -> Any:
        return actor.poll.options(library_call=("train", self.name, f"rank {rank}")).remote(
            POLL_S)

    def _drain(self, polls: dict[int, Any], failed: dict[int, BaseException]) -> None:
        """Take what the live workers reported before the failure was seen: a round every
        rank made, whose last report was still on its way, is committed, not lost (a restart
        starts after it). A long poll answers at once when reports wait, so waiting one poll's
        length takes every report made by then."""
        live = {rank: ref for rank, ref in polls.items() if rank not in failed}
        if not live:
            return
        ready, _ = nbdist.wait(list(live.values()), num_returns=len(live), timeout=POLL_S + 0.5)
        for rank, ref in live.items():
            if ref in ready:
                try:
                    reports, _ = nbdist.get(ref)
                except Exception:  # this worker died too: the failure is already known
                    continue
                self._take(rank, reports)

    @staticmethod
    def _cause(error: BaseException, run_ref: Any) -> BaseException:
        """A failed poll means a dead worker; its ``run`` call says how it died, when it can."""
        if run_ref is None:
            return error
        ready, _ = nbdist.wait([run_ref], timeout=POLL_S)
        if not ready:
            return error
        try:
            nbdist.get(run_ref)
        except Exception as exc:
            return exc
        return error

    def _stranded(self, values: dict[int, Any],
                  polls: dict[int, Any]) -> dict[int, BaseException]:
        """A rank waiting in a report that a rank whose function returned (and whose reports
        were all taken) never made: that round can never be committed."""
        for index, got in self.rounds.items():
            done = [r for r in range(self.num_workers) if r in values and r not in polls
                    and r not in got]
            if done:
                waiting = min(got)
                return {waiting: RuntimeError(
                    f"worker {waiting} waits in its train.report number {index + 1}, which "
                    f"worker {done[0]} never makes: its training function returned after "
                    f"{self.iterations[done[0]]} report(s). A report is a step of the whole "
                    "group: every worker must call train.report the same number of times.")}
        return {}

    def _take(self, rank: int, reports: list[Report]) -> None:
        """Add a rank's reports to their rounds; commit each round every rank has made."""
        for report in reports:
            got = self.rounds.setdefault(report.index, {})
            got[rank] = report
            if len(got) == self.num_workers:
                del self.rounds[report.index]
                self._commit([got[r] for r in range(self.num_workers)])

    def _commit(self, reports: list[Report]) -> None:
        index, metrics = reports[0].index, reports[0].metrics
        path = storage.commit(reports)
        checkpoint = None if path is None else Checkpoint(path)
        self.history.append(metrics)
        if checkpoint is not None:
            self._keep(index, checkpoint, metrics)
        for rank, report in enumerate(reports):
            self.iterations[rank] = index + 1
            self.last_metrics[rank] = report.metrics
            self._publish(rank, "RUNNING", "checkpoint saved" if rank == 0 and path else "")
        if self.group is not None:
            for actor in self.group.actors:
                actor.commit.remote(index, path)
        if self.tune_report is not None:
            self.tune_report(metrics, checkpoint=checkpoint)
        self._call_back("after_report", [r.metrics for r in reports], checkpoint)

    def _call_back(self, method: str, *args: Any) -> None:
        for callback in self.callbacks:
            hook = getattr(callback, method, None)
            if hook is not None:
                hook(self.run_context, *args)

    def _keep(self, index: int, checkpoint: Checkpoint, metrics: dict[str, Any]) -> None:
        dropped = self.manager.register(index, checkpoint, metrics)
        for checkpoint in dropped:
            shutil.rmtree(checkpoint.path, ignore_errors=True)
        write_snapshot(self.run_dir, self.history, self.manager.best_checkpoints)

    def _publish(self, rank: int, status: str, note: str) -> None:
        metrics = tuple((k, float(v)) for k, v in self.last_metrics[rank].items()
                        if isinstance(v, (int, float)))
        events.publish(events.RunUpdate(time.time(), "train", run=self.name,
                                        member=f"rank {rank}", status=status,
                                        iteration=self.iterations[rank], metrics=metrics,
                                        note=note))

    def _publish_all(self, status: str, note: str) -> None:
        for rank in range(self.num_workers):
            self._publish(rank, status, note)

    def _failed(self, failed: dict[int, BaseException], attempts: int) -> Result:
        details = "\n\n".join(describe_failure(r, e) for r, e in sorted(failed.items()))
        error = WorkerGroupError(
            f"Training failed after {attempts} attempt(s) (FailureConfig.max_failures="
            f"{self.failure_config.max_failures}; set it higher, or -1, to restart more):\n"
            f"{details}", failed)
        rank = root_rank(failed)
        self._publish_all("ERROR", f"worker {rank} failed: {_short(failed[rank])}")
        return self._result(error=error)

    def _result(self, error: WorkerGroupError | None = None, return_value: Any = None) -> Result:
        write_snapshot(self.run_dir, self.history, self.manager.best_checkpoints)
        return Result(metrics=self.history[-1] if self.history else None,
                      checkpoint=self.manager.latest, error=error, path=self.run_dir,
                      best_checkpoints=self.manager.best_checkpoints,
                      return_value=return_value, history=list(self.history),
                      _config=self.trainer.train_loop_config)


@dataclass(frozen=True)
class RunContext:
    """What a callback is told about the run (Ray's ``TrainRunContext``)."""

    run_config: RunConfig
    train_loop_config: dict[str, Any] | None
    scaling_config: ScalingConfig
    experiment_name: str

    def get_run_config(self) -> RunConfig:
        return self.run_config

    def get_train_loop_config(self) -> dict[str, Any] | None:
        return self.train_loop_config

    def get_scaling_config(self) -> ScalingConfig:
        return self.scaling_config


def gather(refs: list[Any]) -> tuple[dict[int, Any], dict[int, BaseException]]:
    """Each call's value by rank once all are done, or as soon as one fails (the others may
    be waiting for it) with the errors so far."""
    values: dict[int, Any] = {}
    failed: dict[int, BaseException] = {}
    pending = dict(enumerate(refs))
    while pending and not failed:
        ready, _ = nbdist.wait(list(pending.values()), num_returns=1, timeout=WAIT_S)
        for rank, ref in list(pending.items()):
            if ref in ready:
                del pending[rank]
                try:
                    values[rank] = nbdist.get(ref)
                except Exception as exc:
                    failed[rank] = exc
    return values, failed


def _unanswered(polls: dict[int, Any], ended: dict[int, float]) -> dict[int, BaseException]:
    """The ranks whose function returned more than `REPLY_S` ago while their poll is still
    unanswered."""
    now = time.monotonic()
    return {rank: TimeoutError(
                f"worker {rank}'s training function returned, but the worker did not hand over "
                f"its last reports within {REPLY_S:g} s (its process answers no call)")
            for rank in polls if rank in ended and now - ended[rank] > REPLY_S}


def _more_failures(running: dict[int, Any],
                   failed: dict[int, BaseException]) -> dict[int, BaseException]:
    """Failures of other ranks that follow the first within a moment: a dead worker makes its
    peers' collectives fail too, and the dead one is the cause worth naming."""
    pending = {rank: ref for rank, ref in running.items() if rank not in failed}
    if not pending:
        return {}
    nbdist.wait(list(pending.values()), num_returns=len(pending), timeout=POLL_S)
    more: dict[int, BaseException] = {}
    ready, _ = nbdist.wait(list(pending.values()), num_returns=len(pending), timeout=0)
    for rank, ref in pending.items():
        if ref in ready:
            try:
                nbdist.get(ref)
            except Exception as exc:
                more[rank] = exc
    return more


def _tune_report() -> Any:
    """``tune.report`` when this fit runs inside a Tune trial, so rank 0's reports become the
    trial's (Ray Train's TuneReportCallback, implied); None elsewhere."""
    try:
        from nbdist import tune

        tune.get_context()
    except (ImportError, RuntimeError):
        return None
    return tune.report


def _rank_datasets(trainer: DataParallelTrainer, n: int, whole: Any,
                   nodes: list[str]) -> list[Any]:
    """[nbdist.data] Each rank's ``datasets`` for this attempt, as the trainer's DataConfig
    gives them (a new streaming shard per rank of each split Dataset); the stored ``whole``
    when no value is an ``nbdist.data`` Dataset (the workers take their share)."""
    datasets = trainer.datasets
    if not any(type(v).__module__.startswith("nbdist.data") for v in datasets.values()):
        return [whole] * n
    return trainer.dataset_config.configure(datasets, world_size=n, worker_node_ids=nodes)


def _short(error: BaseException) -> str:
    cause = getattr(error, "cause", None) or error
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[0] if text else ''}"

"""The running trial's side of a report: ``tune.report``, ``get_checkpoint``, ``get_context``.

Lives in the trial's actor process. The trainable runs on one thread of the actor and appends
each report to ``Session.results`` without waiting for anyone; the driver's ``poll`` call, on
another thread of the same actor, takes every report buffered so far in one reply and hands
back the scheduler's decision for the trial. A STOP or PAUSE decision takes effect at the
trainable's next ``report``, which raises ``StopTrial`` to unwind it (a ``BaseException``, so a
trainable's ``except Exception`` does not swallow it). A ``RunConfig(stop={...})`` dict is
also checked here, so a report that meets it is the trial's last without waiting for the
driver to say so. A poll may also carry ``SAVE``: a callback asked for a checkpoint, which a
class trainable takes after its current step.

A checkpoint given to ``report`` is copied under the trial's directory in the run's storage
(``checkpoint_000003``) before the report is buffered, so the driver only ever sees checkpoints
that are already persisted.
"""

from __future__ import annotations

import datetime
import os
import shutil
import socket
import threading
import time
from typing import Any

from nbdist.tune.checkpoint import Checkpoint
from nbdist.tune.stopper import DictStopper

_current: Session | None = None


# What a poll carries to ask for a checkpoint: "SAVE" alone (the trial goes on) or after the
# decision ("STOP+SAVE").
SAVE = "SAVE"


class StopTrial(BaseException):
    """Raised inside a trainable at ``report`` when the driver asked the trial to stop."""


class TuneContext:
    """What a trainable can ask about the trial it runs (``tune.get_context()``)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self._spec = spec

    def get_trial_id(self) -> str:
        return str(self._spec["trial_id"])

    def get_trial_name(self) -> str:
        return str(self._spec["trial_name"])

    def get_trial_dir(self) -> str:
        return str(self._spec["trial_dir"])

    def get_experiment_name(self) -> str:
        return str(self._spec["experiment_name"])

    def get_trial_resources(self) -> Any:
        from nbdist.tune.trainable.resources import PlacementGroupFactory

        return PlacementGroupFactory(self._spec.get("bundles") or [self._spec["resources"]])

    def get_world_rank(self) -> int:
        return 0

    def get_world_size(self) -> int:
        return 1

    def get_local_rank(self) -> int:
        return 0

    def get_storage(self) -> Any:
        return self._spec["trial_dir"]


class Session:
    """One trial's run in an actor: its reports, its decision, whether it has ended."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.trial_id: str = spec["trial_id"]
        self.run_key: str = spec.get("run_key", self.trial_id)  # this start of the trial
        self.context = TuneContext(spec)
        self.cond = threading.Condition()
        self.results: list[dict[str, Any]] = []
        self.decision = ""
        # A driver-side request for a checkpoint (a callback set ``should_checkpoint``): a
        # class trainable saves after its current step; a function trainable checkpoints
        # itself through ``report``, so it has nothing to do.
        self.save_requested = False
        # RunConfig(stop={...}) checked here too, so a trial stops at the report that meets
        # it instead of running on until the driver's STOP arrives (a class trainable's
        # checkpoint at its end then holds the state of that report, as in Ray).
        criteria = spec.get("stop")
        self.stopper = DictStopper(criteria) if criteria else None
        self.done = False
        self.ended_itself = False  # met a stop criterion here, before the driver said so
        self.polls = 0  # polls received
        self.takes = 0  # polls that took reports
        # (the pickled exception or None, its traceback text)
        self.error: tuple[bytes | None, str] | None = None
        self.iteration = int(spec.get("iteration", 0))
        self.checkpoint_index = int(spec.get("checkpoint_index", 0))
        self.restore = spec.get("checkpoint")
        self.start = time.time()
        self.last = self.start
        self.time_total = float(spec.get("time_total", 0.0))
        self.host = socket.gethostname()

    def report(self, metrics: dict[str, Any], checkpoint: Checkpoint | None = None) -> None:
        if self.decision:
            raise StopTrial(self.decision)
        now = time.time()
        self.iteration += 1
        result = dict(metrics)
        if checkpoint is not None:
            checkpoint = self.persist(checkpoint)
            result["checkpoint_dir_name"] = os.path.basename(checkpoint.path)
        since = now - self.start
        result.update(
            training_iteration=self.iteration, trial_id=self.trial_id,
            time_this_iter_s=now - self.last, time_total_s=self.time_total + since,
            time_since_restore=since, iterations_since_restore=self.iteration - int(
                self.spec.get("iteration", 0)),
            timestamp=int(now), date=datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S"),
            pid=os.getpid(), hostname=self.host, done=bool(metrics.get("done", False)))
        self.last = now
        with self.cond:
            self.results.append(result if checkpoint is None else {**result,
                                                                   "__checkpoint": checkpoint})
            if not self.decision and self.criteria_met(result):
                self.decision = "STOP"  # the driver decides the same from this report
                self.ended_itself = True
            self.cond.notify_all()

    def criteria_met(self, result: dict[str, Any]) -> bool:
        if self.stopper is None:
            return False
        try:
            return self.stopper(self.trial_id, result)
        except (KeyError, TypeError):  # not reported, or not comparable: the driver says so
            return False

    def persist(self, checkpoint: Checkpoint) -> Checkpoint:
        trial_dir = self.spec["trial_dir"]
        if os.path.dirname(os.path.abspath(checkpoint.path)) == os.path.abspath(trial_dir):
            return checkpoint
        target = self.new_checkpoint_dir()
        os.rmdir(target)
        shutil.copytree(checkpoint.path, target)
        return Checkpoint(target)

    def new_checkpoint_dir(self) -> str:
        """An empty directory for the trial's next checkpoint, under its storage directory."""
        target = os.path.join(self.spec["trial_dir"], f"checkpoint_{self.checkpoint_index:06d}")
        self.checkpoint_index += 1
        if os.path.exists(target):
            shutil.rmtree(target)
        os.makedirs(target)
        return target

    def take_save_request(self) -> bool:
        with self.cond:
            requested, self.save_requested = self.save_requested, False
            return requested

    def await_driver(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) until the driver has taken every report and sent the
        poll that answers them, which carries a callback's request for a checkpoint."""
        deadline = time.monotonic() + timeout
        with self.cond:
            if self.cond.wait_for(lambda: not self.results, timeout):
                answered = self.polls
                self.cond.wait_for(lambda: self.polls > answered,
                                   max(0.0, deadline - time.monotonic()))

    def final_checkpoint(self, checkpoint: Checkpoint) -> None:
        """A checkpoint without metrics of its own, standing for the trial's latest report:
        taken as the trial stops (pause, ``checkpoint_at_end``) or when the driver asked."""
        with self.cond:
            self.results.append({"__checkpoint": checkpoint, "__final": True,
                                 "training_iteration": self.iteration})
            self.cond.notify_all()

    def finish(self, error: tuple[bytes | None, str] | None = None) -> None:
        with self.cond:
            self.error = error
            self.done = True
            self.cond.notify_all()

    def take(self, decision: str, timeout: float) -> tuple[list[dict[str, Any]], bool,
                                                           tuple[bytes | None, str] | None]:
        """Every buffered report, waiting up to ``timeout`` s for one; whether the trial ended."""
        with self.cond:
            self.polls += 1
            self.cond.notify_all()
            decision, _, save = decision.partition("+")  # "SAVE", "STOP+SAVE", "STOP"
            if SAVE in (decision, save):
                self.save_requested = True
            if decision and decision != SAVE:
                self.decision = decision
            if not self.results and not self.done:
                self.cond.wait(timeout)
            out, self.results = self.results, []
            self.takes += bool(out)
            return out, self.done, self.error

    def leftovers(self) -> tuple[list[dict[str, Any]], int]:
        """At the end of a trial: the reports no poll took, for ``run``'s reply, and how many
        polls took reports (each report goes out in exactly one reply)."""
        with self.cond:
            out, self.results = self.results, []
            return out, self.takes


def current() -> Session | None:
    return _current


def set_current(session: Session | None) -> None:
    global _current
    _current = session


def _session(what: str) -> Session:
    if _current is None:
        raise RuntimeError(f"tune.{what}() can only be called inside a trial's trainable "
                           "(a function or Trainable run by Tuner.fit / tune.run)")
    return _current


def report(metrics: dict[str, Any] | None = None, *, checkpoint: Checkpoint | None = None,
           **kwargs: Any) -> None:
    """Report the trial's metrics for one iteration, with an optional checkpoint to keep
    (``tune.report({"loss": l})``; Ray 1's ``tune.report(loss=l)`` works too)."""
    _session("report").report({**(metrics or {}), **kwargs}, checkpoint)


def get_checkpoint() -> Checkpoint | None:
    """The checkpoint the trial restarts from (after a failure, a pause or PBT), else None."""
    return _session("get_checkpoint").restore


def get_context() -> TuneContext:
    return _session("get_context").context

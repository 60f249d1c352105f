"""The actor that runs trials: one process, one trial at a time, reused between trials.

Two of its threads matter (it is a threaded actor, ``max_concurrency=2``):

    driver ── run(spec) ──────▶ thread A: the trainable; each report appends to Session.results
           ── poll(key, decision) ▶ thread B: waits for reports, returns them all at once,
                                             and leaves the decision where report() sees it

``run`` returns when the trainable ends (returns, raises, or is stopped at a report), with its
failure, the reports no poll took, and how many polls took reports: a short trial, over before
the driver's first poll, costs one call, and the driver can finish a trial from this reply alone
when it holds every poll reply that took reports (a poll still in flight then has nothing to
add, and may never be answered if the actor is stuck). A poll names the run it is for
(``spec["run_key"]``, one per start of a trial), so a trial paused and resumed on the same actor
is never answered by its previous, finished run. The actor's repr names the trial it runs
(``Trial(<trial id>)``), which is how the notebook groups a trial's printed lines.
"""

from __future__ import annotations

import inspect
import os
import pickle
import threading
import traceback
from typing import Any

from nbdist.tune.checkpoint import Checkpoint
from nbdist.tune.trainable import session as _session
from nbdist.tune.trainable.trainable import DICT_CHECKPOINT, Trainable, load_trainable_checkpoint

# How long a class trainable that ended on its own waits for the driver's answer to its last
# reports (a checkpoint a callback asks for) before it returns.
AWAIT_DRIVER_S = 5.0


class TrialActor:
    def __init__(self, trainable: Any) -> None:
        self.trainable = trainable
        self.session: _session.Session | None = None
        self.cond = threading.Condition()
        self.instance: Trainable | None = None
        self.label = "Trial(idle)"

    def __repr__(self) -> str:
        return self.label

    def pid(self) -> int:
        return os.getpid()

    def run(self, spec: dict[str, Any]) -> tuple[list[dict[str, Any]], Any, int]:
        """Run one trial to its end; returns the reports no poll took, its failure, and the
        number of polls that took reports."""
        session = _session.Session(spec)
        self.label = f"Trial({spec['trial_id']})"
        with self.cond:
            self.session = session
            self.cond.notify_all()
        _session.set_current(session)
        error = None
        try:
            if isinstance(self.trainable, type) and issubclass(self.trainable, Trainable):
                self.run_class(session)
            else:
                self.run_function(session)
        except _session.StopTrial:
            pass
        except BaseException as exc:  # the trial's failure is data for the driver
            error = (_error_blob(exc), traceback.format_exc())
        finally:
            _session.set_current(None)
            session.finish(error)
        leftovers, takes = session.leftovers()
        return leftovers, error, takes

    def poll(self, run_key: str, decision: str, timeout: float) -> tuple[
            list[dict[str, Any]], bool, Any]:
        """The reports of the run ``run_key`` (one start of a trial), waiting for that run to
        begin: a paused trial resumed on the same actor must not be answered by the session
        of its previous start, which has ended."""
        with self.cond:
            self.cond.wait_for(lambda: self.session is not None
                               and self.session.run_key == run_key, timeout)
            session = self.session
        if session is None or session.run_key != run_key:
            return [], False, None
        return session.take(decision, timeout)

    def run_function(self, session: _session.Session) -> None:
        fn = self.trainable
        config = dict(session.spec["config"])
        if _wants_reporter(fn):
            output = fn(config, _Reporter(session))
        else:
            output = fn(config)
        if isinstance(output, dict):
            session.report(output)

    def run_class(self, session: _session.Session) -> None:
        spec = session.spec
        config = dict(spec["config"])
        instance = self.instance
        if instance is None or type(instance) is not self.trainable or not instance.reset_config(
                config):
            if instance is not None:
                instance.cleanup()
            self.instance = None
            instance = self.trainable(config, trial_info=spec)
            self.instance = instance
        else:
            instance.config = config
            instance._bind(spec)
        instance._iteration = int(spec.get("iteration", 0))
        if spec.get("checkpoint") is not None:
            load_trainable_checkpoint(instance, spec["checkpoint"])
        stopped = _step_until_stopped(instance, session)
        if stopped == "ended":  # on its own: a callback may yet ask for a checkpoint
            session.await_driver(AWAIT_DRIVER_S)
        if stopped == "PAUSE" or spec.get("checkpoint_at_end") or session.take_save_request():
            session.final_checkpoint(_save(instance, session))


def _step_until_stopped(instance: Trainable, session: _session.Session) -> str:
    """Step and report until the trainable ends ("ended") or the driver's decision stops it
    ("STOP", "PAUSE"), saving checkpoints as due or as asked."""
    frequency = int(session.spec.get("checkpoint_frequency", 0) or 0)
    try:
        while True:
            if session.decision:  # before a step, so its report is not one to drop
                return "ended" if session.ended_itself else session.decision
            result = instance.step()
            if not isinstance(result, dict):
                raise TypeError(f"{type(instance).__name__}.step() must return a dict of "
                                f"metrics, not {type(result).__name__}")
            instance._iteration += 1
            due = (frequency and instance._iteration % frequency == 0) or result.get(
                "should_checkpoint")
            session.report(result, _save(instance, session) if due else None)
            if result.get("done"):
                return "ended"
            if session.take_save_request():
                session.final_checkpoint(_save(instance, session))
    except _session.StopTrial as stop:
        return str(stop)


def _wants_reporter(fn: Any) -> bool:
    """The seed's ``my_func(config, reporter)``: a second positional parameter."""
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return False
    return len(params) >= 2 and params[1].default is inspect.Parameter.empty


class _Reporter:
    """The reporter of Ray Tune's first API: ``reporter(mean_accuracy=..., done=False)``."""

    def __init__(self, session: _session.Session) -> None:
        self.session = session

    def __call__(self, _metrics: dict[str, Any] | None = None, **metrics: Any) -> None:
        self.session.report({**(_metrics or {}), **metrics})

    @property
    def logdir(self) -> str:
        return str(self.session.spec["trial_dir"])


def _save(instance: Trainable, session: _session.Session) -> Checkpoint:
    target = session.new_checkpoint_dir()
    saved = instance.save_checkpoint(target)
    if isinstance(saved, dict):
        with open(os.path.join(target, DICT_CHECKPOINT), "wb") as f:
            pickle.dump(saved, f)
    return Checkpoint(target)


def _error_blob(exc: BaseException) -> bytes | None:
    """The exception itself when it pickles, so the driver can hand back the user's type."""
    try:
        import cloudpickle

        return cloudpickle.dumps(exc)
    except Exception:
        return None

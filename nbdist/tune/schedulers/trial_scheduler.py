"""The scheduler interface (Ray Tune's ``TrialScheduler``) and ``FIFOScheduler``.

A scheduler is a decision function over plain data: the runner tells it about trials
(``on_trial_add``, ``on_trial_result``, ``on_trial_complete``, ``on_trial_error``,
``on_trial_remove``) and asks it which waiting trial to start next (``choose_trial_to_run``).
``on_trial_result`` answers with a decision for the reporting trial:

- ``CONTINUE``: keep training;
- ``PAUSE``: stop at this report and keep the trial for later (``choose_trial_to_run`` may pick
  it again); a scheduler that wants it to restart elsewhere sets ``trial.restore_from``;
- ``STOP``: end the trial (TERMINATED);
- ``NOOP``: the scheduler already changed the trial's status itself.

The controller passed in offers ``get_trials()`` and ``get_live_trials()``; a scheduler reads
trials (``status``, ``last_result``, ``checkpoint``, ``config``) and never starts or stops
processes. The one exception is Ray's own: a synchronous scheduler (HyperBand) that has to end
a *paused* trial other than the reporting one calls ``tune_controller.stop_trial(trial)``.

Custom schedulers written for Ray subclass these classes unchanged.
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any

import cloudpickle

if TYPE_CHECKING:
    from nbdist.tune.experiment.trial import Trial

# The metric name used when a run sets a mode but no metric (Ray's ``DEFAULT_METRIC``).
DEFAULT_METRIC = "_metric"

PENDING, RUNNING, PAUSED, TERMINATED, ERROR = (
    "PENDING", "RUNNING", "PAUSED", "TERMINATED", "ERROR")


class TrialScheduler:
    """Decides, per reported result, whether a trial goes on, pauses or stops."""

    CONTINUE = "CONTINUE"
    PAUSE = "PAUSE"
    STOP = "STOP"
    NOOP = "NOOP"

    _metric: str | None = None
    _mode: str | None = None
    _supports_buffered_results = True

    @property
    def metric(self) -> str | None:
        return self._metric

    @property
    def supports_buffered_results(self) -> bool:
        return self._supports_buffered_results

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        """Take the run's metric and mode; False if the scheduler already has its own."""
        if self._metric and metric:
            return False
        if self._mode and mode:
            return False
        if metric:
            self._metric = metric
        if mode:
            self._mode = mode
        if self._metric is None and self._mode:
            self._metric = DEFAULT_METRIC
        return True

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        raise NotImplementedError

    def on_trial_error(self, tune_controller: Any, trial: Trial) -> None:
        raise NotImplementedError

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict[str, Any]) -> str:
        raise NotImplementedError

    def on_trial_complete(self, tune_controller: Any, trial: Trial,
                          result: dict[str, Any]) -> None:
        raise NotImplementedError

    def on_trial_remove(self, tune_controller: Any, trial: Trial) -> None:
        raise NotImplementedError

    def choose_trial_to_run(self, tune_controller: Any) -> Trial | None:
        raise NotImplementedError

    def debug_string(self) -> str:
        raise NotImplementedError

    def save(self, checkpoint_path: str) -> None:
        # cloudpickle: a scheduler may hold user functions (PBT's custom_explore_fn, lambdas).
        with open(checkpoint_path, "wb") as f:
            cloudpickle.dump(self.__dict__, f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            self.__dict__.update(pickle.load(f))


class FIFOScheduler(TrialScheduler):
    """Runs trials in the order they were added and never stops one early."""

    def __init__(self) -> None:
        self._metric = None
        self._mode = None

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        pass

    def on_trial_error(self, tune_controller: Any, trial: Trial) -> None:
        pass

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict[str, Any]) -> str:
        return TrialScheduler.CONTINUE

    def on_trial_complete(self, tune_controller: Any, trial: Trial,
                          result: dict[str, Any]) -> None:
        pass

    def on_trial_remove(self, tune_controller: Any, trial: Trial) -> None:
        pass

    def choose_trial_to_run(self, tune_controller: Any) -> Trial | None:
        trials = tune_controller.get_trials()
        for trial in trials:
            if trial.status == PENDING:
                return trial
        for trial in trials:
            if trial.status == PAUSED:
                return trial
        return None

    def debug_string(self) -> str:
        return "Using FIFO scheduling algorithm."


def metric_op(mode: str | None) -> float | None:
    """+1 for ``max``, -1 for ``min``: scores compare as "higher is better" either way."""
    return {"max": 1.0, "min": -1.0}.get(mode or "")


def require_metric(scheduler: TrialScheduler, ready: bool) -> None:
    if not ready:
        raise ValueError(
            f"{type(scheduler).__name__} has no metric ({scheduler._metric}) or mode "
            f"({scheduler._mode}); pass them to the scheduler or to tune.TuneConfig(metric=..., "
            "mode=...)")


def check_mode(mode: str | None) -> None:
    if mode and mode not in ("min", "max"):
        raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")

"""The median stopping rule (Golovin et al., "Google Vizier", KDD 2017).

At time ``t`` (``time_attr``) past ``grace_period``, a trial stops if its best result so far is
strictly worse than the median, over the other trials that have reached ``t``, of their
running averages: the mean of their results between ``grace_period`` and ``t``. At least
``min_samples_required`` other trials must have reached ``t``; until then the trial yields its
slot (PAUSE) when trials are waiting to run, at most once per ``min_time_slice``, else goes on.
With ``hard_stop=False`` a losing trial is paused instead of stopped and later runs FIFO.

Ray's defaults: ``time_attr="time_total_s"``, ``grace_period=60.0`` (seconds),
``min_samples_required=3``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

from nbdist.tune.schedulers.trial_scheduler import (
    PAUSED,
    PENDING,
    FIFOScheduler,
    TrialScheduler,
    check_mode,
    require_metric,
)

if TYPE_CHECKING:
    from nbdist.tune.experiment.trial import Trial


class MedianStoppingRule(FIFOScheduler):
    """Ray's ``MedianStoppingRule``, same arguments and defaults."""

    def __init__(self, time_attr: str = "time_total_s", metric: str | None = None,
                 mode: str | None = None, grace_period: float = 60.0,
                 min_samples_required: int = 3, min_time_slice: float = 0,
                 hard_stop: bool = True) -> None:
        check_mode(mode)
        super().__init__()
        self._stopped_trials: set[Trial] = set()
        self._grace_period = grace_period
        self._min_samples_required = min_samples_required
        self._min_time_slice = min_time_slice
        self._metric = metric
        self._mode = mode
        self._time_attr = time_attr
        self._hard_stop = hard_stop
        self._last_pause: dict[Trial, float] = {}
        self._results: dict[Trial, list[dict[str, Any]]] = defaultdict(list)

    def _best(self, values: list[float]) -> float:
        return max(values) if self._mode == "max" else min(values)

    def _worse(self, value: float, than: float) -> bool:
        return value < than if self._mode == "max" else value > than

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        require_metric(self, bool(self._metric and self._mode))

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict[str, Any]) -> str:
        if self._time_attr not in result or self._metric not in result:
            return TrialScheduler.CONTINUE
        if trial in self._stopped_trials:
            # Only reachable with hard_stop=False: a paused loser resumed later runs FIFO.
            return TrialScheduler.CONTINUE
        time = result[self._time_attr]
        self._results[trial].append(result)
        if time < self._grace_period:
            return TrialScheduler.CONTINUE
        others = [t for t in self._trials_beyond_time(time) if t is not trial]
        if len(others) < self._min_samples_required:
            action = self._on_insufficient_samples(tune_controller, trial, time)
            if action == TrialScheduler.PAUSE:
                self._last_pause[trial] = time
            return action
        median = float(np.median([self._running_mean(t, time) for t in others]))
        best = self._best([r[self._metric] for r in self._results[trial]])
        if self._worse(best, median):
            self._stopped_trials.add(trial)
            return TrialScheduler.STOP if self._hard_stop else TrialScheduler.PAUSE
        return TrialScheduler.CONTINUE

    def on_trial_complete(self, tune_controller: Any, trial: Trial,
                          result: dict[str, Any]) -> None:
        if result and self._time_attr in result and self._metric in result:
            self._results[trial].append(result)

    def debug_string(self) -> str:
        return f"Using MedianStoppingRule: num_stopped={len(self._stopped_trials)}."

    def _on_insufficient_samples(self, tune_controller: Any, trial: Trial, time: float) -> str:
        if time - self._last_pause.get(trial, -math.inf) <= self._min_time_slice:
            return TrialScheduler.CONTINUE
        waiting = any(t.status in (PENDING, PAUSED) for t in tune_controller.get_live_trials())
        return TrialScheduler.PAUSE if waiting else TrialScheduler.CONTINUE

    def _trials_beyond_time(self, time: float) -> list[Trial]:
        return [t for t, results in self._results.items()
                if results[-1][self._time_attr] >= time]

    def _running_mean(self, trial: Trial, time: float) -> float:
        assert self._metric is not None
        scoped = [r[self._metric] for r in self._results[trial]
                  if self._grace_period <= r[self._time_attr] <= time]
        return float(np.mean(scoped))

"""Synchronous HyperBand (Li et al., https://arxiv.org/abs/1603.06560), as Ray Tune runs it.

Three levels. A *band* holds up to ``s_max + 1`` brackets, ``s_max = round(log(max_t) /
log(eta))``; bracket ``s`` admits ``n0 = ceil((s_max + 1) / (s + 1) * eta**s)`` trials and
first judges them at ``r0 = int(max_t * eta**-s)`` time units. New trials fill the current
bracket, then a new bracket (``s`` + 1), then a new band.

Within a bracket the halving is synchronous: a trial that reaches the bracket's milestone is
PAUSED until every live trial of the bracket has reached it. The last one to arrive triggers
the halving: trials are ranked by score, the best ``ceil(n / eta)`` are kept and the
milestone grows by ``eta`` (capped at ``max_t``); the others stop (the reporting trial by the
returned STOP, paused ones through ``tune_controller.stop_trial``, or by setting their status
to TERMINATED when the controller has no such method). Kept paused trials become
runnable again: ``choose_trial_to_run`` returns them (brackets least complete first). After the
last halving (``s`` rounds), trials reaching the final milestone stop.

Scores are ``metric`` times +1 (``mode="max"``) or -1 (``"min"``). Ray's defaults:
``time_attr="training_iteration"``, ``max_t=81``, ``reduction_factor=3``.
"""

from __future__ import annotations

import collections
import logging
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from nbdist.tune.schedulers.trial_scheduler import (
    PAUSED,
    PENDING,
    RUNNING,
    TERMINATED,
    FIFOScheduler,
    TrialScheduler,
    check_mode,
    metric_op,
    require_metric,
)

if TYPE_CHECKING:
    from nbdist.tune.experiment.trial import Trial

logger = logging.getLogger(__name__)


class HyperBandScheduler(FIFOScheduler):
    """Ray's ``HyperBandScheduler``, same arguments and defaults."""

    _supports_buffered_results = False

    def __init__(self, time_attr: str = "training_iteration", metric: str | None = None,
                 mode: str | None = None, max_t: float = 81, reduction_factor: float = 3,
                 stop_last_trials: bool = True) -> None:
        if not max_t > 0:
            raise ValueError(f"max_t must be positive, got {max_t}")
        check_mode(mode)
        super().__init__()
        self._eta = reduction_factor
        self._s_max_1 = int(np.round(np.log(max_t) / np.log(reduction_factor))) + 1
        self._max_t_attr = max_t
        self._hyperbands: list[list[_Bracket | None]] = [[]]
        self._trial_info: dict[Trial, tuple[_Bracket, int]] = {}
        self._current: _Bracket | None = None
        self._band_idx = 0
        self._num_stopped = 0
        self._metric = metric
        self._mode = mode
        self._metric_op = metric_op(mode)
        self._time_attr = time_attr
        self._stop_last_trials = stop_last_trials

    def _n0(self, s: int) -> int:
        return int(math.ceil(self._s_max_1 / (s + 1) * self._eta ** s))

    def _r0(self, s: int) -> int:
        return int(self._max_t_attr * self._eta ** (-s))

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        if not super().set_search_properties(metric, mode, **spec):
            return False
        self._metric_op = metric_op(self._mode)
        return True

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        require_metric(self, bool(self._metric and self._metric_op))
        if self._current is None or self._current.filled():
            self._current = self._next_bracket()
        self._current.add_trial(trial)
        self._trial_info[trial] = self._current, self._band_idx

    def _next_bracket(self) -> _Bracket:
        while True:
            band = self._hyperbands[self._band_idx]
            if len(band) == self._s_max_1:
                band = []
                self._hyperbands.append(band)
                self._band_idx += 1
            s = len(band)
            if self._r0(s) == 0:
                # Too small a first milestone for this bracket: it is skipped in every band.
                band.append(None)
                continue
            bracket = _Bracket(self._time_attr, self._n0(s), self._r0(s), self._max_t_attr,
                               self._eta, s, self._stop_last_trials)
            band.append(bracket)
            return bracket

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict[str, Any]) -> str:
        bracket, _ = self._trial_info[trial]
        bracket.update_trial_stats(trial, result)
        if bracket.continue_trial(trial):
            return TrialScheduler.CONTINUE
        return self._process_bracket(tune_controller, bracket)

    def _process_bracket(self, tune_controller: Any, bracket: _Bracket) -> str:
        """Halve the bracket once all its live trials reached the milestone; else PAUSE.

        When the bracket is processed, at most one of its trials is RUNNING (the reporting
        one): the others reached the milestone earlier and were paused, or have finished.
        """
        action = TrialScheduler.PAUSE
        if not bracket.cur_iter_done():
            return action
        if bracket.finished():
            bracket.cleanup_full(tune_controller)
            return TrialScheduler.STOP
        bracket.is_being_processed = True
        assert self._metric is not None and self._metric_op is not None
        good, bad = bracket.successive_halving(self._metric, self._metric_op)
        self._num_stopped += len(bad)
        for t in bad:
            if t.status == PAUSED or getattr(t, "is_saving", False):
                bracket.cleanup_trial(t)
                _stop_other(tune_controller, t)
            elif t.status == RUNNING:
                bracket.cleanup_trial(t)
                action = TrialScheduler.STOP
            else:
                raise RuntimeError(f"HyperBand found {t} {t.status} among a bracket's live trials")
        for t in good:
            if bracket.continue_trial(t):
                if t.status == PAUSED or getattr(t, "is_saving", False):
                    self._unpause_trial(tune_controller, t)
                    bracket.trials_to_unpause.add(t)
                elif t.status == RUNNING:
                    action = TrialScheduler.CONTINUE
            elif bracket.finished() and bracket.stop_last_trials:
                if t.status == PAUSED or getattr(t, "is_saving", False):
                    bracket.cleanup_trial(t)
                    _stop_other(tune_controller, t)
                elif t.status == RUNNING:
                    bracket.cleanup_trial(t)
                    action = TrialScheduler.STOP
        bracket.is_being_processed = False
        return action

    def _unpause_trial(self, tune_controller: Any, trial: Trial) -> None:
        """A hook for subclasses (BOHB tells its searcher here); nothing by default."""

    def on_trial_remove(self, tune_controller: Any, trial: Trial) -> None:
        entry = self._trial_info.get(trial)
        if entry is None:
            return
        bracket, _ = entry
        if trial not in bracket.current_trials():
            return  # HyperBand stopped it itself and has already accounted for it
        bracket.cleanup_trial(trial)
        if not bracket.finished() and not bracket.is_being_processed:
            self._process_bracket(tune_controller, bracket)

    def on_trial_complete(self, tune_controller: Any, trial: Trial,
                          result: dict[str, Any]) -> None:
        self.on_trial_remove(tune_controller, trial)

    def on_trial_error(self, tune_controller: Any, trial: Trial) -> None:
        self.on_trial_remove(tune_controller, trial)

    def choose_trial_to_run(self, tune_controller: Any) -> Trial | None:
        """A runnable trial of the least complete bracket, earliest band first."""
        for band in self._hyperbands:
            brackets = [b for b in band if b is not None]
            for bracket in sorted(brackets, key=lambda b: b.completion_percentage()):
                for trial in bracket.current_trials():
                    if trial.status == PENDING or (
                            trial.status == PAUSED and trial in bracket.trials_to_unpause):
                        return trial
        return None

    def debug_string(self) -> str:
        total = sum(len(band) for band in self._hyperbands)
        lines = [f"Using HyperBand: num_stopped={self._num_stopped} total_brackets={total}"]
        for i, band in enumerate(self._hyperbands):
            lines.append(f"Round #{i}:")
            lines.extend(f"  {bracket}" for bracket in band if bracket)
        return "\n".join(lines)

    def state(self) -> dict[str, int]:
        return {"num_brackets": sum(len(band) for band in self._hyperbands),
                "num_stopped": self._num_stopped}


def _stop_other(tune_controller: Any, trial: Trial) -> None:
    """End a paused trial of the bracket (not the reporting one, which gets a decision)."""
    stop_trial = getattr(tune_controller, "stop_trial", None)
    if stop_trial is not None:
        stop_trial(trial)
        return
    # A controller without Ray's stop_trial: a paused trial holds no process, so ending it
    # is its status; the controller then never resumes it.
    trial.status = TERMINATED


class _Bracket:
    """One bracket: its live trials with their last results, its milestone and halvings left."""

    def __init__(self, time_attr: str, max_trials: int, init_t_attr: int, max_t_attr: float,
                 eta: float, s: int, stop_last_trials: bool = True) -> None:
        self._live_trials: dict[Trial, dict[str, Any] | None] = {}
        self._all_trials: list[Trial] = []
        self._time_attr = time_attr
        self._n = self._n0 = max_trials
        self._r = self._r0 = init_t_attr
        self._max_t_attr = max_t_attr
        self._cumul_r: float = self._r0
        self._eta = eta
        self._halves = s
        self._total_work = self._calculate_total_work(self._n0, self._r0, s)
        self._completed_progress = 0.0
        self.stop_last_trials = stop_last_trials
        self.is_being_processed = False
        self.trials_to_unpause: set[Trial] = set()

    def add_trial(self, trial: Trial) -> None:
        assert not self.filled(), "cannot add a trial to a filled bracket"
        self._live_trials[trial] = None
        self._all_trials.append(trial)

    def cur_iter_done(self) -> bool:
        return all(self._time(r) >= self._cumul_r for r in self._live_trials.values())

    def finished(self) -> bool:
        if not self.stop_last_trials:
            return False
        return self._halves == 0 and self.cur_iter_done()

    def current_trials(self) -> list[Trial]:
        return list(self._live_trials)

    def continue_trial(self, trial: Trial) -> bool:
        if not self.stop_last_trials and self._halves == 0:
            return True
        return self._time(self._live_trials[trial]) < self._cumul_r

    def filled(self) -> bool:
        return len(self._live_trials) == self._n

    def successive_halving(self, metric: str, metric_op: float
                           ) -> tuple[list[Trial], list[Trial]]:
        if self._halves == 0 and not self.stop_last_trials:
            return list(self._live_trials), []
        assert self._halves > 0
        self._halves -= 1
        self._n = int(math.ceil(self._n / self._eta))
        self._r = int(min(self._r * self._eta, self._max_t_attr))
        self._cumul_r = self._r
        ranked = sorted(self._live_trials,
                        key=lambda t: metric_op * self._live_trials[t][metric])  # type: ignore[index]
        return ranked[-self._n:], ranked[:-self._n]

    def update_trial_stats(self, trial: Trial, result: dict[str, Any]) -> None:
        assert trial in self._live_trials
        observed = self._time(result)
        delta = observed - self._time(self._live_trials[trial])
        if delta <= 0:
            logger.info("%s went back in time (restored?): %s -> %s", trial,
                        self._time(self._live_trials[trial]), observed)
        self._completed_progress += delta
        self._live_trials[trial] = result
        self.trials_to_unpause.discard(trial)

    def cleanup_trial(self, trial: Trial) -> None:
        self._live_trials.pop(trial, None)

    def cleanup_full(self, tune_controller: Any) -> None:
        # The reporting trial is stopped by the returned decision; the paused rest here.
        for trial in self.current_trials():
            if trial.status == PAUSED:
                self.cleanup_trial(trial)
                _stop_other(tune_controller, trial)

    def completion_percentage(self) -> float:
        if self.finished():
            return 1.0
        return min(self._completed_progress / self._total_work, 1.0) if self._total_work else 0.0

    def _time(self, result: dict[str, Any] | None) -> float:
        return 0 if result is None else float(result[self._time_attr])

    def _calculate_total_work(self, n: int, r: float, s: int) -> float:
        work = 0
        cumulative_r = r
        for _ in range(s + 1):
            work += int(n) * int(r)
            n = int(math.ceil(n / self._eta))
            r = int(min(r * self._eta, self._max_t_attr - cumulative_r))
        return work

    def __repr__(self) -> str:
        counts = collections.Counter(t.status for t in self._all_trials)
        statuses = ", ".join(sorted(f"{k}: {v}" for k, v in counts.items()))
        return (f"Bracket(Max Size (n)={self._n}, Milestone (r)={self._cumul_r}, "
                f"completed={self.completion_percentage():.1%}): {{{statuses}}}")

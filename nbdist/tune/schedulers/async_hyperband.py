"""Asynchronous successive halving (ASHA; Li et al., https://arxiv.org/abs/1810.05934).

A bracket has rungs at ``grace_period * reduction_factor**(k + s)`` time units. When a trial's
``time_attr`` first reaches a rung, its score is compared with the scores recorded there by
the trials that reached it before: below the ``1 - 1/reduction_factor`` quantile (numpy's
``nanpercentile``, linear interpolation), it stops; either way its score joins the rung. No
trial ever waits for another (unlike HyperBand), so the decision is immediate and the first
trials to reach a rung are judged against few peers. With several ``brackets`` a trial is
placed in one at random, brackets with more rungs weighted by a softmax of their rung counts.
Trials reaching ``max_t`` stop (unless ``stop_last_trials=False``).

Scores are ``metric`` times +1 (``mode="max"``) or -1 (``"min"``): higher is always better.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from nbdist.tune.schedulers.trial_scheduler import (
    FIFOScheduler,
    TrialScheduler,
    check_mode,
    metric_op,
    require_metric,
)

if TYPE_CHECKING:
    from nbdist.tune.experiment.trial import Trial

logger = logging.getLogger(__name__)


class AsyncHyperBandScheduler(FIFOScheduler):
    """Ray's ``AsyncHyperBandScheduler`` (``ASHAScheduler``), same arguments and defaults."""

    def __init__(self, time_attr: str = "training_iteration", metric: str | None = None,
                 mode: str | None = None, max_t: float = 100, grace_period: float = 1,
                 reduction_factor: float = 4, brackets: int = 1,
                 stop_last_trials: bool = True) -> None:
        if not max_t > 0:
            raise ValueError(f"max_t must be positive, got {max_t}")
        if not grace_period > 0:
            raise ValueError(f"grace_period must be positive, got {grace_period}")
        if max_t < grace_period:
            raise ValueError(f"grace_period ({grace_period}) must be <= max_t ({max_t})")
        if not reduction_factor > 1:
            raise ValueError(f"reduction_factor must be > 1, got {reduction_factor}")
        if brackets < 1:
            raise ValueError(f"brackets must be positive, got {brackets}")
        check_mode(mode)
        super().__init__()
        self._reduction_factor = reduction_factor
        self._max_t = max_t
        self._trial_info: dict[str, _Bracket] = {}
        self._brackets = [_Bracket(grace_period, max_t, reduction_factor, s, stop_last_trials)
                          for s in range(brackets)]
        self._num_stopped = 0
        self._metric = metric
        self._mode = mode
        self._metric_op = metric_op(mode)
        self._time_attr = time_attr
        self._stop_last_trials = stop_last_trials

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        if not super().set_search_properties(metric, mode, **spec):
            return False
        self._metric_op = metric_op(self._mode)
        return True

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        require_metric(self, bool(self._metric and self._metric_op))
        sizes = np.array([len(b.rungs) for b in self._brackets])
        weights = np.exp(sizes - sizes.max())
        index = np.random.choice(len(self._brackets), p=weights / weights.sum())
        self._trial_info[trial.trial_id] = self._brackets[index]

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict[str, Any]) -> str:
        if self._time_attr not in result or self._metric not in result:
            return TrialScheduler.CONTINUE
        assert self._metric_op is not None and self._metric is not None
        if result[self._time_attr] >= self._max_t and self._stop_last_trials:
            action = TrialScheduler.STOP
        else:
            bracket = self._trial_info[trial.trial_id]
            action = bracket.on_result(trial.trial_id, result[self._time_attr],
                                       self._metric_op * result[self._metric])
        if action == TrialScheduler.STOP:
            self._num_stopped += 1
        return action

    def on_trial_complete(self, tune_controller: Any, trial: Trial,
                          result: dict[str, Any]) -> None:
        bracket = self._trial_info.pop(trial.trial_id, None)
        if bracket is None or not result:
            return
        if self._time_attr in result and self._metric in result:
            assert self._metric_op is not None and self._metric is not None
            bracket.on_result(trial.trial_id, result[self._time_attr],
                              self._metric_op * result[self._metric])

    def on_trial_remove(self, tune_controller: Any, trial: Trial) -> None:
        self._trial_info.pop(trial.trial_id, None)

    def on_trial_error(self, tune_controller: Any, trial: Trial) -> None:
        self._trial_info.pop(trial.trial_id, None)

    def debug_string(self) -> str:
        return "\n".join([f"Using AsyncHyperBand: num_stopped={self._num_stopped}",
                          *(b.debug_str() for b in self._brackets)])


ASHAScheduler = AsyncHyperBandScheduler


class _Bracket:
    """The rungs of one bracket, highest milestone first, each a dict trial id -> score."""

    def __init__(self, min_t: float, max_t: float, reduction_factor: float, s: int,
                 stop_last_trials: bool = True) -> None:
        self.rf = reduction_factor
        num_rungs = int(np.log(max_t / min_t) / np.log(self.rf) - s + 1)
        self.rungs: list[tuple[float, dict[str, float]]] = [
            (min_t * self.rf ** (k + s), {}) for k in reversed(range(num_rungs))]
        self._stop_last_trials = stop_last_trials

    def cutoff(self, recorded: dict[str, float]) -> float | None:
        if not recorded:
            return None
        return float(np.nanpercentile(list(recorded.values()), (1 - 1 / self.rf) * 100))

    def on_result(self, trial_id: str, cur_iter: float, cur_rew: float | None) -> str:
        action = TrialScheduler.CONTINUE
        for milestone, recorded in self.rungs:
            if cur_iter >= milestone and trial_id in recorded and not self._stop_last_trials:
                # Already judged at the highest rung it reached: the decision stands.
                break
            if cur_iter < milestone or trial_id in recorded:
                continue
            cutoff = self.cutoff(recorded)
            if cutoff is not None and cur_rew is not None and cur_rew < cutoff:
                action = TrialScheduler.STOP
            if cur_rew is None:
                logger.warning("the metric of a result is None; ASHA cannot rank it")
            else:
                recorded[trial_id] = cur_rew
            break
        return action

    def debug_str(self) -> str:
        rungs = " | ".join(f"Iter {milestone:.3f}: {self.cutoff(recorded)}"
                           for milestone, recorded in self.rungs)
        return "Bracket: " + rungs

"""Population Based Training (Jaderberg et al., https://arxiv.org/abs/1711.09846), as Ray's.

Every ``perturbation_interval`` units of ``time_attr`` (after ``burn_in_period``) a trial's
score is recorded and the live trials with a score are ranked. The bottom
``quantile_fraction`` of them (``ceil(n * fraction)``, at most ``n // 2``) *exploit* the top
quantile: a trial at the bottom copies a random top trial's config, *explores* it
(``_explore``: each key of ``hyperparam_mutations`` is resampled with
``resample_probability``, else a continuous value is multiplied by one of
``perturbation_factors`` and a list value moves to a neighbour; then ``custom_explore_fn``),
and restarts from that top trial's latest checkpoint.

The exploit is a decision over plain data, the runner does the restart: the scheduler sets
``trial.config`` (the explored config), ``trial.experiment_tag`` (``<tag>@perturbed[...]``)
and ``trial.restore_from`` (the donor's checkpoint), then returns PAUSE when other trials wait
for a slot (``choose_trial_to_run`` takes the least trained first) or CONTINUE, meaning
"restart now from ``restore_from`` with the new config". A donor without a checkpoint is not
exploited (as in Ray).

``synch=True`` is Ray's synchronous variant: every trial pauses at the interval until all live
trials reached it, then the whole population is ranked at once.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nbdist.tune.schedulers.trial_scheduler import (
    PAUSED,
    PENDING,
    FIFOScheduler,
    TrialScheduler,
    check_mode,
    metric_op,
    require_metric,
)
from nbdist.tune.search.sample import Domain, Function
from nbdist.tune.search.search_generator import SearchGenerator
from nbdist.tune.search.variant_generator import format_vars

if TYPE_CHECKING:
    from nbdist.tune.experiment.trial import Trial

logger = logging.getLogger(__name__)

Mutations = dict[str, Any]


class _PBTTrialState:
    """What PBT remembers per trial between intervals."""

    def __init__(self, trial: Trial) -> None:
        self.orig_tag = trial.experiment_tag
        self.last_score: float | None = None
        self.last_checkpoint: Any = None
        self.last_perturbation_time: float = 0
        self.last_train_time: float = 0
        self.last_result: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return str((self.last_score, self.last_checkpoint, self.last_train_time,
                    self.last_perturbation_time))


def _explore(config: dict[str, Any], mutations: Mutations, resample_probability: float,
             perturbation_factors: tuple[float, ...],
             custom_explore_fn: Callable[[dict[str, Any]], dict[str, Any]] | None
             ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The perturbed config and, per key, what was done to it ("resample", "* 1.2", ...)."""
    operations: dict[str, Any] = {}
    new_config = copy.deepcopy(config)
    for key, distribution in mutations.items():
        if isinstance(distribution, dict):
            new_config[key], operations[key] = _explore(
                config[key], distribution, resample_probability, perturbation_factors, None)
        elif isinstance(distribution, list | tuple):
            new_config[key], operations[key] = _explore_list(
                config[key], list(distribution), resample_probability)
        elif isinstance(distribution, Domain) or callable(distribution):
            if random.random() < resample_probability:
                new_config[key] = (distribution.sample(None) if isinstance(distribution, Domain)
                                   else distribution())
                operations[key] = "resample"
            else:
                factor = random.choice(perturbation_factors)
                new_config[key] = config[key] * factor
                operations[key] = f"* {factor}"
            if isinstance(config[key], int):
                new_config[key] = int(new_config[key])
        else:
            raise ValueError(
                f"hyperparam_mutations[{key!r}] is a {type(distribution).__name__}; use a list, "
                "a dict, a function or a search-space domain (tune.uniform, ...)")
    if custom_explore_fn is not None:
        new_config = custom_explore_fn(new_config)
        if new_config is None:
            raise ValueError("custom_explore_fn returned None; it must return the config")
    return new_config, operations


def _explore_list(value: Any, values: list[Any], resample_probability: float
                  ) -> tuple[Any, str]:
    if random.random() < resample_probability or value not in values:
        return random.choice(values), "resample"
    shift = random.choice([-1, 1])
    old = values.index(value)
    new = min(max(old + shift, 0), len(values) - 1)
    return values[new], f"shift {'left' if shift == -1 else 'right'}{' (noop)' if old == new else ''}"


def _make_experiment_tag(orig_tag: str, config: dict[str, Any], mutations: Mutations) -> str:
    resolved = {("config", key): config[key] for key in mutations}
    return f"{orig_tag}@perturbed[{format_vars(resolved)}]"


def _fill_config(config: dict[str, Any], attr: str, space: Any) -> None:
    """Give ``config`` a starting value for ``attr`` drawn from its mutation space."""
    if isinstance(space, Domain):
        config[attr] = space.sample(None)
    elif isinstance(space, list | tuple):
        config[attr] = random.choice(space)
    elif isinstance(space, dict):
        config[attr] = {}
        for key, value in space.items():
            _fill_config(config[attr], key, value)
    elif callable(space):
        config[attr] = space()


def _filter_mutated(config: dict[str, Any], mutations: Mutations) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        if key in mutations:
            out[key] = (_filter_mutated(value, mutations[key]) if isinstance(value, dict)
                        else value)
    return out


class PopulationBasedTraining(FIFOScheduler):
    """Ray's ``PopulationBasedTraining``, same arguments and defaults."""

    def __init__(self, time_attr: str = "time_total_s", metric: str | None = None,
                 mode: str | None = None, perturbation_interval: float = 60.0,
                 burn_in_period: float = 0.0, hyperparam_mutations: Mutations | None = None,
                 quantile_fraction: float = 0.25, resample_probability: float = 0.25,
                 perturbation_factors: tuple[float, ...] = (1.2, 0.8),
                 custom_explore_fn: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 log_config: bool = True, require_attrs: bool = True,
                 synch: bool = False) -> None:
        hyperparam_mutations = hyperparam_mutations or {}
        _check_mutations(hyperparam_mutations)
        if not hyperparam_mutations and custom_explore_fn is None:
            raise ValueError(
                "PopulationBasedTraining needs hyperparam_mutations or custom_explore_fn")
        if not 0 <= quantile_fraction <= 0.5:
            raise ValueError(
                f"quantile_fraction must be between 0 and 0.5, got {quantile_fraction}")
        if perturbation_interval <= 0:
            raise ValueError(
                f"perturbation_interval must be positive, got {perturbation_interval}")
        check_mode(mode)
        super().__init__()
        self._metric = metric
        self._mode = mode
        self._metric_op = metric_op(mode)
        self._time_attr = time_attr
        self._perturbation_interval = perturbation_interval
        self._burn_in_period = burn_in_period
        self._hyperparam_mutations = hyperparam_mutations
        self._quantile_fraction = quantile_fraction
        self._resample_probability = resample_probability
        self._perturbation_factors = perturbation_factors
        self._custom_explore_fn = custom_explore_fn
        self._log_config = log_config
        self._require_attrs = require_attrs
        self._synch = synch
        self._trial_state: dict[Trial, _PBTTrialState] = {}
        self._next_perturbation_sync = max(perturbation_interval, burn_in_period)
        self._num_checkpoints = 0
        self._num_perturbations = 0

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        if not super().set_search_properties(metric, mode, **spec):
            return False
        self._metric_op = metric_op(self._mode)
        return True

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        # Ray's controller calls the config source ``search_alg``; nbdist's, ``source``.
        source = getattr(tune_controller, "search_alg", None) or getattr(
            tune_controller, "source", None)
        if isinstance(source, SearchGenerator):
            raise ValueError(
                "PopulationBasedTraining picks configs itself and cannot be used with a "
                "searcher; remove search_alg")
        require_metric(self, bool(self._metric and self._metric_op))
        self._trial_state[trial] = _PBTTrialState(trial)
        for attr, space in self._hyperparam_mutations.items():
            if attr not in trial.config:
                _fill_config(trial.config, attr, space)
                trial.evaluated_params[attr] = trial.config[attr]

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict[str, Any]) -> str:
        if not self._has_attrs(result):
            return TrialScheduler.CONTINUE
        time = result[self._time_attr]
        state = self._trial_state[trial]
        if time < self._burn_in_period:
            return TrialScheduler.CONTINUE
        if time - state.last_perturbation_time < self._perturbation_interval:
            return TrialScheduler.CONTINUE
        self._save_trial_state(state, time, result, trial)
        if self._synch:
            return self._on_synch_result(tune_controller, trial, time)
        state.last_perturbation_time = time
        lower, upper = self._quantiles()
        waiting = any(t.status in (PENDING, PAUSED) for t in tune_controller.get_trials())
        self._checkpoint_or_exploit(trial, upper, lower)
        # A trial yields its slot at each interval when others wait for one. An exploited
        # trial (``restore_from`` set) restarts from its donor's checkpoint: now on CONTINUE,
        # when picked again on PAUSE.
        return TrialScheduler.PAUSE if waiting else TrialScheduler.CONTINUE

    def _has_attrs(self, result: dict[str, Any]) -> bool:
        for name, what in ((self._time_attr, "time_attr"), (self._metric, "metric")):
            if name in result:
                continue
            message = (f"PopulationBasedTraining's {what} {name!r} is not in the trial's "
                       f"result {sorted(result)}; report it from the trainable")
            if self._require_attrs:
                raise RuntimeError(message + " (or pass require_attrs=False to skip such "
                                   "results)")
            logger.warning(message)
            return False
        return True

    def _on_synch_result(self, tune_controller: Any, trial: Trial, time: float) -> str:
        behind = [t for t in tune_controller.get_live_trials()
                  if t is not trial
                  and self._trial_state[t].last_train_time < self._next_perturbation_sync]
        if not behind:
            lower, upper = self._quantiles()
            middle = [t for t in tune_controller.get_trials()
                      if t not in lower and t not in upper]
            # Top trials record their checkpoints before bottom ones look for a donor.
            for t in upper + middle + lower:
                if t in self._trial_state:
                    self._trial_state[t].last_perturbation_time = time
                    self._checkpoint_or_exploit(t, upper, lower)
            latest = max(self._trial_state[t].last_train_time
                         for t in tune_controller.get_trials() if t in self._trial_state)
            self._next_perturbation_sync = max(
                self._next_perturbation_sync + self._perturbation_interval, latest)
        return TrialScheduler.NOOP if trial.status == PAUSED else TrialScheduler.PAUSE

    def _save_trial_state(self, state: _PBTTrialState, time: float, result: dict[str, Any],
                          trial: Trial) -> float:
        assert self._metric_op is not None and self._metric is not None
        score = self._metric_op * result[self._metric]
        state.last_score = score
        state.last_train_time = time
        state.last_result = result
        return score

    def _checkpoint_or_exploit(self, trial: Trial, upper: list[Trial],
                               lower: list[Trial]) -> None:
        state = self._trial_state[trial]
        if trial in upper:
            # The trial's latest reported checkpoint; Ray instead asks the trial to save now.
            state.last_checkpoint = trial.checkpoint
            self._num_checkpoints += 1
        else:
            state.last_checkpoint = None
        if trial not in lower:
            return
        donor = random.choice(upper)
        assert donor is not trial
        if not self._trial_state[donor].last_checkpoint:
            logger.info("PBT: %s has no checkpoint; %s does not exploit it", donor, trial)
            return
        self._exploit(trial, donor)

    def _exploit(self, trial: Trial, donor: Trial) -> None:
        """Give ``trial`` the donor's explored config and checkpoint, to restart from."""
        state, donor_state = self._trial_state[trial], self._trial_state[donor]
        new_config, operations = _explore(donor.config, self._hyperparam_mutations,
                                          self._resample_probability,
                                          self._perturbation_factors, self._custom_explore_fn)
        logger.info("PBT: trial %s (score %s) exploits %s (score %s): %s", trial.trial_id,
                    state.last_score, donor.trial_id, donor_state.last_score,
                    _summary(_filter_mutated(donor.config, self._hyperparam_mutations),
                             _filter_mutated(new_config, self._hyperparam_mutations),
                             operations))
        if self._log_config:
            self._log_config_on_step(state, donor_state, trial, donor, new_config)
        trial.experiment_tag = _make_experiment_tag(state.orig_tag, new_config,
                                                    self._hyperparam_mutations)
        trial.config = new_config
        for key in self._hyperparam_mutations:
            if key in trial.evaluated_params:
                trial.evaluated_params[key] = new_config.get(key)
        trial.restore_from = copy.copy(donor_state.last_checkpoint)
        self._num_perturbations += 1
        state.last_perturbation_time = donor_state.last_perturbation_time
        state.last_train_time = donor_state.last_train_time

    def _log_config_on_step(self, state: _PBTTrialState, donor_state: _PBTTrialState,
                            trial: Trial, donor: Trial, new_config: dict[str, Any]) -> None:
        """Append the step to ``pbt_global.txt`` and the trial's ``pbt_policy_<id>.txt``."""
        if not trial.local_path:
            return
        experiment_dir = os.path.dirname(trial.local_path.rstrip(os.sep))
        policy = [state.orig_tag, donor_state.orig_tag,
                  trial.last_result.get("training_iteration", 0),
                  donor.last_result.get("training_iteration", 0), donor.config, new_config]
        line = json.dumps(policy, default=repr) + "\n"
        with open(os.path.join(experiment_dir, "pbt_global.txt"), "a") as f:
            f.write(line)
        trial_file = os.path.join(experiment_dir, f"pbt_policy_{trial.trial_id}.txt")
        donor_file = os.path.join(experiment_dir, f"pbt_policy_{donor.trial_id}.txt")
        # The trial inherits the donor's history of configs, then this step.
        history = ""
        if os.path.exists(donor_file):
            with open(donor_file) as f:
                history = f.read()
        with open(trial_file, "w") as f:
            f.write(history + line)

    def _quantiles(self) -> tuple[list[Trial], list[Trial]]:
        """(bottom, top) trials by last score; both empty with fewer than two scored."""
        trials = [t for t, s in self._trial_state.items()
                  if s.last_score is not None and not t.is_finished]
        trials.sort(key=lambda t: self._trial_state[t].last_score)  # type: ignore[arg-type,return-value]
        if len(trials) <= 1:
            return [], []
        count = int(math.ceil(len(trials) * self._quantile_fraction))
        if count > len(trials) / 2:
            count = int(math.floor(len(trials) / 2))
        if count == 0:
            return [], []
        return trials[:count], trials[-count:]

    def choose_trial_to_run(self, tune_controller: Any) -> Trial | None:
        """The waiting trial with the least training time, so the population stays level."""
        candidates = [t for t in tune_controller.get_trials()
                      if t.status in (PENDING, PAUSED)
                      and (not self._synch or self._state_of(t).last_train_time
                           < self._next_perturbation_sync)]
        candidates.sort(key=lambda t: self._state_of(t).last_train_time)
        return candidates[0] if candidates else None

    def _state_of(self, trial: Trial) -> _PBTTrialState:
        if trial not in self._trial_state:
            self._trial_state[trial] = _PBTTrialState(trial)
        return self._trial_state[trial]

    def on_trial_complete(self, tune_controller: Any, trial: Trial,
                          result: dict[str, Any]) -> None:
        pass

    def debug_string(self) -> str:
        return (f"PopulationBasedTraining: {self._num_checkpoints} checkpoints, "
                f"{self._num_perturbations} perturbs")


def _check_mutations(mutations: Mutations) -> None:
    for key, value in mutations.items():
        if isinstance(value, Function):
            raise ValueError(
                f"hyperparam_mutations[{key!r}] is a tune.sample_from; PBT cannot perturb "
                "one: use tune.uniform, tune.loguniform, a list or a plain function")
        if not (isinstance(value, dict | list | tuple | Domain) or callable(value)):
            raise TypeError(
                f"hyperparam_mutations[{key!r}] must be a list, tuple, dict, search-space "
                f"domain or function, got {type(value).__name__}")


def _summary(old: dict[str, Any], new: dict[str, Any], operations: dict[str, Any],
             prefix: str = "") -> str:
    lines = []
    for key, old_value in old.items():
        if isinstance(old_value, dict):
            lines.append(f"{prefix}{key} :")
            lines.append(_summary(old_value, new[key], operations.get(key, {}), prefix + "    "))
        else:
            op = operations.get(key)
            arrow = f"--- ({op}) -->" if op else "----->"
            lines.append(f"{prefix}{key} : {old_value} {arrow} {new.get(key)}")
    return "\n".join(lines) or "no hyperparameter mutated"

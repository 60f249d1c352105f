"""``OptunaSearch``: configs proposed by an optuna study (TPE by default), as Ray's.

The space is nbdist domains (from ``param_space`` or the ``space`` argument), optuna
distributions keyed by name, or a define-by-run function ``f(trial)`` calling
``trial.suggest_*`` (and optionally returning constants). Nested parameters are named by their
path joined with ``/`` on optuna's side and nested again in the configs.

Per trial id the searcher holds one optuna trial from ``study.ask``: intermediate results are
reported to it (``training_iteration`` as the step), and the final result is told to the study
as COMPLETE, FAIL (an error without the metric) or PRUNED (no metric, e.g. a scheduler stopped
it before it reported one).

optuna is imported when an ``OptunaSearch`` is created, never by ``import nbdist.tune``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from nbdist.tune.search.sample import (
    Categorical,
    Domain,
    Float,
    Integer,
    LogUniform,
    Quantized,
    Uniform,
)
from nbdist.tune.search.searcher import Searcher
from nbdist.tune.search.variant_generator import (
    domain_vars_by_name,
    flatten_dict,
    parse_spec_vars,
    unflatten_dict,
)

logger = logging.getLogger(__name__)

_INSTALL_HINT = 'OptunaSearch needs optuna: pip install "nbdist[tune]" (or pip install optuna)'


def _import_optuna() -> Any:
    try:
        import optuna
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    return optuna


class OptunaSearch(Searcher):
    """Ray's ``OptunaSearch``: same arguments (``space``, ``metric``, ``mode``,
    ``points_to_evaluate``, ``sampler``, ``seed``, ``evaluated_rewards``)."""

    def __init__(self, space: dict[str, Any] | Callable[[Any], dict[str, Any] | None] | None = None,
                 metric: str | list[str] | None = None, mode: str | list[str] | None = None,
                 points_to_evaluate: list[dict[str, Any]] | None = None,
                 sampler: Any = None, seed: int | None = None,
                 evaluated_rewards: list[Any] | None = None) -> None:
        self._ot = _import_optuna()
        # optuna logs a line per finished trial at INFO; the run's own view reports trials.
        if self._ot.logging.get_verbosity() == self._ot.logging.INFO:
            self._ot.logging.set_verbosity(self._ot.logging.WARNING)
        super().__init__(metric=None, mode=None)
        self._metric: Any = metric
        self._mode: Any = mode
        self._space: Any = self._convert_given(space)
        self._points_to_evaluate = [dict(flatten_dict_slash(p)) for p in points_to_evaluate or []]
        self._evaluated_rewards = evaluated_rewards
        if evaluated_rewards is not None and len(evaluated_rewards) != len(self._points_to_evaluate):
            raise ValueError("evaluated_rewards needs one reward per point of points_to_evaluate")
        self._sampler = sampler
        self._seed = seed
        self._study: Any = None
        self._ot_trials: dict[str, Any] = {}
        self._completed_trials: set[str] = set()
        if self._space and self._metric and self._mode:
            self._setup_study()

    def _convert_given(self, space: Any) -> Any:
        if space is None or callable(space):
            return space
        if not isinstance(space, dict):
            raise TypeError(f"space must be a dict or a define-by-run function, got {space!r}")
        _, domain_vars, grid_vars = parse_spec_vars(space)
        if domain_vars or grid_vars:
            return self.convert_search_space(space)
        # Already optuna distributions, possibly nested.
        return flatten_dict_slash(space)

    def convert_search_space(self, space: dict[str, Any]) -> dict[str, Any]:
        """nbdist domains -> optuna distributions, keyed ``"a/b"`` by path."""
        return {name: self._to_distribution(name, domain)
                for name, domain in domain_vars_by_name(space, "Optuna").items()}

    def _to_distribution(self, name: str, domain: Domain) -> Any:
        dist = self._ot.distributions
        sampler = domain.get_sampler()
        step = None
        if isinstance(sampler, Quantized):
            step, sampler = sampler.q, sampler.sampler
        if isinstance(domain, Float) and isinstance(sampler, LogUniform | Uniform):
            log = isinstance(sampler, LogUniform)
            if log and step is not None:
                raise ValueError(f"{name}: optuna cannot sample a quantized log-uniform float")
            return dist.FloatDistribution(domain.lower, domain.upper, log=log, step=step)
        if isinstance(domain, Integer) and isinstance(sampler, LogUniform | Uniform):
            log = isinstance(sampler, LogUniform)
            if log and step not in (None, 1):
                raise ValueError(f"{name}: optuna cannot sample a quantized log-uniform integer")
            # nbdist integer domains exclude ``upper``; optuna's include ``high``.
            return dist.IntDistribution(int(domain.lower), int(domain.upper) - 1, log=log,
                                        step=int(step or 1))
        if isinstance(domain, Categorical) and not domain.is_grid():
            return dist.CategoricalDistribution(domain.categories)
        raise ValueError(
            f"{name}: OptunaSearch cannot convert {domain!r}; it takes uniform, log-uniform and "
            "quantized floats and integers and tune.choice (not randn, sample_from)")

    def set_search_properties(self, metric: str | None, mode: str | None,
                              config: dict[str, Any], **spec: Any) -> bool:
        if self._space:
            return False
        self._space = self.convert_search_space(config)
        if metric:
            self._metric = metric
        if mode:
            self._mode = mode
        self._setup_study()
        return True

    def _setup_study(self) -> None:
        if not self._metric or not self._mode:
            raise ValueError("OptunaSearch needs a metric and a mode (in it or in TuneConfig)")
        ot = self._ot
        sampler = self._sampler or ot.samplers.TPESampler(seed=self._seed)
        if isinstance(self._mode, list):
            directions = ["maximize" if m == "max" else "minimize" for m in self._mode]
            self._study = ot.create_study(sampler=sampler, directions=directions)
        else:
            direction = "maximize" if self._mode == "max" else "minimize"
            self._study = ot.create_study(sampler=sampler, direction=direction)
        if self._evaluated_rewards is not None and not callable(self._space):
            for point, reward in zip(self._points_to_evaluate, self._evaluated_rewards,
                                     strict=True):
                self.add_evaluated_point(point, reward)
        else:
            for point in self._points_to_evaluate:
                self._study.enqueue_trial(point)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        if not self._space:
            raise RuntimeError(
                "OptunaSearch has no search space: pass space= or a param_space with "
                "search-space values (tune.uniform, ...)")
        if self._study is None:
            self._setup_study()
        if trial_id not in self._ot_trials:
            if callable(self._space):
                self._ot_trials[trial_id] = self._study.ask()
            else:
                self._ot_trials[trial_id] = self._study.ask(fixed_distributions=self._space)
        ot_trial = self._ot_trials[trial_id]
        if callable(self._space):
            returned = self._space(ot_trial)
            if returned is not None and not isinstance(returned, dict):
                raise TypeError(
                    f"the define-by-run function returned {returned!r}; return a dict of "
                    "constants or None")
            params = {**ot_trial.params, **(returned or {})}
        else:
            params = dict(ot_trial.params)
        return unflatten_dict(params)

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        if isinstance(self._metric, list) or trial_id not in self._ot_trials:
            return  # optuna reports intermediate values of single-objective studies only
        if self._metric not in result or "training_iteration" not in result:
            return
        self._ot_trials[trial_id].report(result[self._metric], result["training_iteration"])

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None,
                          error: bool = False) -> None:
        if trial_id in self._completed_trials or trial_id not in self._ot_trials:
            return
        value: Any = None
        if result:
            if isinstance(self._metric, list):
                value = [result.get(m) for m in self._metric]
                value = None if any(v is None for v in value) else value
            else:
                value = result.get(self._metric)
        state = self._ot.trial.TrialState.COMPLETE
        if value is None:
            state = self._ot.trial.TrialState.FAIL if error else self._ot.trial.TrialState.PRUNED
        try:
            self._study.tell(self._ot_trials[trial_id], value, state=state)
        except Exception as exc:
            logger.warning("optuna refused the result of trial %s: %s", trial_id, exc)
        self._completed_trials.add(trial_id)

    def add_evaluated_point(self, parameters: dict[str, Any], value: Any, error: bool = False,
                            pruned: bool = False,
                            intermediate_values: list[float] | None = None) -> None:
        if callable(self._space):
            raise TypeError("define-by-run spaces cannot take points evaluated elsewhere")
        if self._study is None:
            self._setup_study()
        ot = self._ot
        flat = flatten_dict_slash(parameters)
        state = (ot.trial.TrialState.FAIL if error else
                 ot.trial.TrialState.PRUNED if pruned else ot.trial.TrialState.COMPLETE)
        values = value if isinstance(value, list) else [value]
        trial = ot.trial.create_trial(
            params=flat, distributions={k: self._space[k] for k in flat},
            values=values if state == ot.trial.TrialState.COMPLETE else None,
            state=state,
            intermediate_values=dict(enumerate(intermediate_values or [], start=1)))
        self._study.add_trial(trial)

    def get_state(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_ot"}

    def set_state(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._ot = _import_optuna()


def flatten_dict_slash(nested: dict[str, Any]) -> dict[str, Any]:
    return {"/".join(map(str, path)): value for path, value in flatten_dict(nested).items()}

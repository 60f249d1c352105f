"""``BayesOptSearch``: a Gaussian process over uniform float domains, as Ray's.

The bayesian-optimization package's ``BayesianOptimization`` holds the observations and
proposes points with an acquisition function (upper confidence bound by default, Ray's
``utility_kwargs={"kind": "ucb", "kappa": 2.576, "xi": 0.0}``; ``"ei"`` and ``"poi"`` also).

Ray's bookkeeping is kept: the first ``random_search_steps`` results are buffered and
registered together (the GP is not fitted on fewer points); a proposal seen before is skipped
(``skip_duplicate``, the suggestion is None: ask again) and once one has been proposed more
than ``patience`` times the search is FINISHED. Only ``tune.uniform`` (and ``quniform``, its
quantization dropped with a warning, as Ray) can be searched: any other domain raises.

bayes_opt is imported when a ``BayesOptSearch`` is created, never by ``import nbdist.tune``.
"""

from __future__ import annotations

import collections
import json
import logging
import math
from typing import Any

from nbdist.tune.search.sample import Domain, Float, Quantized, Uniform
from nbdist.tune.search.searcher import Searcher
from nbdist.tune.search.variant_generator import (
    domain_vars_by_name,
    flatten_dict,
    parse_spec_vars,
    unflatten_dict,
)

logger = logging.getLogger(__name__)

_INSTALL_HINT = ('BayesOptSearch needs bayesian-optimization: pip install "nbdist[tune]" '
                 "(or pip install bayesian-optimization)")


def _import_bayes_opt() -> Any:
    try:
        import bayes_opt
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    return bayes_opt


class BayesOptSearch(Searcher):
    """Ray's ``BayesOptSearch``: same arguments and defaults."""

    def __init__(self, space: dict[str, Any] | None = None, metric: str | None = None,
                 mode: str | None = None, points_to_evaluate: list[dict[str, Any]] | None = None,
                 utility_kwargs: dict[str, Any] | None = None, random_state: int = 42,
                 random_search_steps: int = 10, verbose: int = 0, patience: int = 5,
                 skip_duplicate: bool = True) -> None:
        self._bo = _import_bayes_opt()
        super().__init__(metric=metric, mode=mode)
        self._utility_kwargs = {"kind": "ucb", "kappa": 2.576, "xi": 0.0,
                                **(utility_kwargs or {})}
        self._random_state = random_state
        self._verbose = verbose
        self._patience = patience
        self._skip_duplicate = skip_duplicate
        self.random_search_trials = random_search_steps
        self._total_random_search_trials = 0
        self._points_to_evaluate = [_flatten(p) for p in points_to_evaluate or []]
        self._live_trial_mapping: dict[str, dict[str, float]] = {}
        self._buffered_trial_results: list[tuple[dict[str, float], dict[str, Any]]] = []
        self._config_counter: collections.Counter[str] = collections.Counter()
        self._space: dict[str, tuple[float, float]] = {}
        self.optimizer: Any = None
        if space:
            _, domain_vars, grid_vars = parse_spec_vars(space)
            self._space = (self.convert_search_space(space) if domain_vars or grid_vars
                           else {k: tuple(v) for k, v in _flatten(space).items()})
        if self._space and metric and mode:
            self._setup_optimizer()

    @staticmethod
    def convert_search_space(space: dict[str, Any]) -> dict[str, tuple[float, float]]:
        """nbdist uniform domains -> ``{"a/b": (lower, upper)}`` bounds."""
        return {name: _bounds(name, domain)
                for name, domain in domain_vars_by_name(space, "BayesOpt").items()}

    def set_search_properties(self, metric: str | None, mode: str | None,
                              config: dict[str, Any], **spec: Any) -> bool:
        if self.optimizer is not None:
            return False
        if not self._space:
            self._space = self.convert_search_space(config)
        if metric:
            self._metric = metric
        if mode:
            self._mode = mode
        self._setup_optimizer()
        return True

    def _setup_optimizer(self) -> None:
        if not self._metric or self._mode not in ("min", "max"):
            raise ValueError("BayesOptSearch needs a metric and a mode (in it or in TuneConfig)")
        if not self._space:
            raise RuntimeError(
                "BayesOptSearch has no search space: pass space= or a param_space with "
                "tune.uniform values")
        self._metric_op = 1.0 if self._mode == "max" else -1.0
        self.optimizer = self._bo.BayesianOptimization(
            f=None, pbounds=dict(self._space), acquisition_function=self._acquisition(),
            random_state=self._random_state, verbose=self._verbose,
            allow_duplicate_points=True)

    def _acquisition(self) -> Any:
        kind = self._utility_kwargs["kind"]
        acquisition = self._bo.acquisition
        if kind == "ucb":
            return acquisition.UpperConfidenceBound(kappa=self._utility_kwargs["kappa"])
        if kind == "ei":
            return acquisition.ExpectedImprovement(xi=self._utility_kwargs["xi"])
        if kind == "poi":
            return acquisition.ProbabilityOfImprovement(xi=self._utility_kwargs["xi"])
        raise ValueError(f"utility_kwargs kind must be 'ucb', 'ei' or 'poi', got {kind!r}")

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        if self.optimizer is None:
            self._setup_optimizer()
        if self._points_to_evaluate:
            config = self._points_to_evaluate.pop(0)
        else:
            config = {k: float(v) for k, v in self.optimizer.suggest().items()}
        key = json.dumps({k: round(v, 5) for k, v in sorted(config.items())})
        already_seen = key in self._config_counter
        self._config_counter[key] += 1
        if self._patience is not None and max(self._config_counter.values()) > self._patience:
            return Searcher.FINISHED
        if already_seen and self._skip_duplicate:
            logger.info("BayesOptSearch: skipping a config proposed before: %s", config)
            return None
        if len(self._buffered_trial_results) < self.random_search_trials:
            # Random phase: no more proposals than random steps until their results are in.
            if self._total_random_search_trials == self.random_search_trials:
                return None
            self._total_random_search_trials += 1
        self._live_trial_mapping[trial_id] = config
        return unflatten_dict(config)

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None,
                          error: bool = False) -> None:
        params = self._live_trial_mapping.pop(trial_id, None)
        if result is None or params is None or error:
            return
        if len(self._buffered_trial_results) >= self.random_search_trials:
            self._register_result(params, result)
            return
        self._buffered_trial_results.append((params, result))
        if len(self._buffered_trial_results) == self.random_search_trials:
            for buffered_params, buffered_result in self._buffered_trial_results:
                self._register_result(buffered_params, buffered_result)

    def _register_result(self, params: dict[str, float], result: dict[str, Any]) -> None:
        assert self._metric is not None
        value = result[self._metric]
        if not math.isfinite(value):
            raise ValueError(
                f"BayesOptSearch got {self._metric}={value} for {params}; a Gaussian process "
                "cannot fit NaN or infinite values")
        self.optimizer.register(params=params, target=self._metric_op * value)

    def add_evaluated_point(self, parameters: dict[str, Any], value: float, error: bool = False,
                            pruned: bool = False,
                            intermediate_values: list[float] | None = None) -> None:
        if error or pruned:
            return
        if self.optimizer is None:
            self._setup_optimizer()
        self.optimizer.register(params=_flatten(parameters), target=self._metric_op * value)

    def get_state(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_bo"}

    def set_state(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._bo = _import_bayes_opt()


def _flatten(nested: dict[str, Any]) -> dict[str, Any]:
    return {"/".join(map(str, path)): value for path, value in flatten_dict(nested).items()}


def _bounds(name: str, domain: Domain) -> tuple[float, float]:
    sampler = domain.get_sampler()
    if isinstance(domain, Float) and isinstance(sampler, Quantized):
        logger.warning("BayesOptSearch: %s is quantized; BayesOpt drops the quantization", name)
        sampler = sampler.sampler
    if isinstance(domain, Float) and isinstance(sampler, Uniform):
        return float(domain.lower), float(domain.upper)
    raise ValueError(
        f"{name}: BayesOptSearch searches uniform float domains only (tune.uniform), got "
        f"{domain!r}; use OptunaSearch for integers, log scales and choices")

"""Search algorithms (Ray Tune's ``tune.search``) and the trial source the runner reads.

``make_trial_source`` is the one entry point of the runner: whatever the user passed as
``search_alg`` (nothing, a ``BasicVariantGenerator``, a ``Searcher``), it returns an object with
``next_config(trial_id) -> (config, tag) | None``, ``finished()``, ``total()``,
``on_trial_result``, ``on_trial_complete``, ``get_state`` and ``set_state``.

``OptunaSearch`` and ``BayesOptSearch`` import their packages (the ``tune`` extra) only when
used, so ``import nbdist.tune`` works without them.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Protocol

from nbdist.tune.search.basic_variant import BasicVariantGenerator
from nbdist.tune.search.repeater import Repeater
from nbdist.tune.search.sample import Domain, grid_search
from nbdist.tune.search.search_generator import SearchGenerator
from nbdist.tune.search.searcher import ConcurrencyLimiter, Searcher
from nbdist.tune.search.variant_generator import generate_variants

if TYPE_CHECKING:
    from nbdist.tune.search.bayesopt import BayesOptSearch
    from nbdist.tune.search.optuna import OptunaSearch

__all__ = [
    "BasicVariantGenerator",
    "BayesOptSearch",
    "ConcurrencyLimiter",
    "Domain",
    "OptunaSearch",
    "Repeater",
    "SearchGenerator",
    "Searcher",
    "TrialSource",
    "create_searcher",
    "generate_variants",
    "grid_search",
    "make_trial_source",
]


class TrialSource(Protocol):
    """What the runner reads configs from."""

    def next_config(self, trial_id: str) -> tuple[dict[str, Any], str] | None: ...
    def finished(self) -> bool: ...
    def total(self) -> int | None: ...
    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None: ...
    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None,
                          error: bool = False) -> None: ...
    def get_state(self) -> dict[str, Any]: ...
    def set_state(self, state: dict[str, Any]) -> None: ...


def make_trial_source(search_alg: Any, param_space: dict[str, Any] | None, num_samples: int,
                      metric: str | None, mode: str | None,
                      max_concurrent: int | None = None) -> TrialSource:
    """The trial source for a run: the basic variant generator, or ``search_alg`` asked
    ``num_samples`` times (behind a ``ConcurrencyLimiter`` when ``max_concurrent`` is set)."""
    if search_alg is None:
        search_alg = BasicVariantGenerator(max_concurrent=max_concurrent or 0)
    if isinstance(search_alg, BasicVariantGenerator):
        if max_concurrent and not search_alg.max_concurrent:
            search_alg.max_concurrent = max_concurrent
        search_alg.add_configurations(param_space, num_samples)
        return search_alg
    if isinstance(search_alg, SearchGenerator):
        search_alg = search_alg.searcher
    if max_concurrent and not isinstance(search_alg, ConcurrencyLimiter):
        search_alg = ConcurrencyLimiter(search_alg, max_concurrent=max_concurrent)
    source = SearchGenerator(search_alg)
    source.add_configurations(param_space, num_samples, metric, mode)
    return source


_SEARCHERS = {"variant_generator": "BasicVariantGenerator", "random": "BasicVariantGenerator",
              "optuna": "OptunaSearch", "bayesopt": "BayesOptSearch"}


def create_searcher(search_alg: str, **kwargs: Any) -> Any:
    """A search algorithm by name, as Ray's ``tune.create_searcher``; arguments the class does
    not take (e.g. ``metric`` for the variant generator) are dropped, as Ray drops them."""
    name = search_alg.lower()
    if name not in _SEARCHERS:
        raise ValueError(f"unknown search algorithm {search_alg!r}; one of {sorted(_SEARCHERS)}")
    cls = globals().get(_SEARCHERS[name]) or __getattr__(_SEARCHERS[name])
    accepted = inspect.signature(cls).parameters
    return cls(**{k: v for k, v in kwargs.items() if k in accepted})


def __getattr__(name: str) -> Any:
    # The searchers on optional packages load on first use, keeping those packages out of
    # ``import nbdist.tune``.
    if name == "OptunaSearch":
        from nbdist.tune.search.optuna import OptunaSearch
        return OptunaSearch
    if name == "BayesOptSearch":
        from nbdist.tune.search.bayesopt import BayesOptSearch
        return BayesOptSearch
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

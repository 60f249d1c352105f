"""The trial source over a ``Searcher``: asks it for up to ``num_samples`` configs.

Each suggestion is written over the ``param_space`` (so constants the searcher does not know
stay in the config) and tagged as Ray tags searcher trials: a counter starting at 1, then every
leaf of the config (``1_lr=0.0100,momentum=0.9000``). A suggestion of None means "nothing
now" (the searcher waits for results, or a ``ConcurrencyLimiter`` is full); ``FINISHED`` or
``num_samples`` suggestions end the source. A negative ``num_samples`` asks forever.
"""

from __future__ import annotations

import copy
from typing import Any

from nbdist.tune.search.searcher import Searcher
from nbdist.tune.search.variant_generator import (
    deep_merge,
    flatten_dict,
    format_vars,
    has_unresolved_values,
)


class SearchGenerator:
    """A trial source (``next_config`` / ``finished`` / ...) driven by a ``Searcher``."""

    def __init__(self, searcher: Searcher) -> None:
        if not isinstance(searcher, Searcher):
            raise TypeError(
                f"search_alg must be a Searcher or a BasicVariantGenerator, got "
                f"{type(searcher).__name__}")
        self.searcher = searcher
        self._space: dict[str, Any] = {}
        self._num_samples = 1
        self._counter = 0
        self._finished = False

    def add_configurations(self, param_space: dict[str, Any] | None, num_samples: int,
                           metric: str | None, mode: str | None) -> None:
        self._space = copy.deepcopy(param_space or {})
        self._num_samples = num_samples
        accepted = self.searcher.set_search_properties(metric, mode, self._space)
        if not accepted and has_unresolved_values({"config": self._space}):
            raise ValueError(
                f"param_space has search-space values (tune.uniform, grid_search, ...) but "
                f"{type(self.searcher).__name__} was already given its space when it was "
                "created; define the space in one place: either param_space or the searcher")

    def total(self) -> int | None:
        return None if self._num_samples < 0 else self._num_samples

    def next_config(self, trial_id: str) -> tuple[dict[str, Any], str] | None:
        if self.finished():
            return None
        suggestion = self.searcher.suggest(trial_id)
        if suggestion == Searcher.FINISHED:
            self._finished = True
            return None
        if suggestion is None:
            return None
        assert isinstance(suggestion, dict)
        config = deep_merge(self._space, suggestion)
        self._counter += 1
        return config, f"{self._counter}_{format_vars(flatten_dict(config))}"

    def finished(self) -> bool:
        return self._finished or (0 <= self._num_samples <= self._counter)

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        self.searcher.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None,
                          error: bool = False) -> None:
        self.searcher.on_trial_complete(trial_id, result=result, error=error)

    def get_state(self) -> dict[str, Any]:
        try:
            searcher_state: dict[str, Any] | None = self.searcher.get_state()
        except NotImplementedError:
            searcher_state = None
        return {"counter": self._counter, "finished": self._finished,
                "num_samples": self._num_samples, "space": self._space,
                "searcher": searcher_state}

    def set_state(self, state: dict[str, Any]) -> None:
        self._counter = state["counter"]
        self._finished = state["finished"]
        self._num_samples = state["num_samples"]
        self._space = state["space"]
        if state["searcher"] is not None:
            self.searcher.set_state(state["searcher"])

"""The basic variant generator: grid axes crossed, random domains sampled, ``num_samples`` times.

It is the trial source used when no searcher is given. Variants are produced lazily, one per
``next_config`` call, in Ray Tune's order: each of ``points_to_evaluate`` first (a partial
config written over the space, its remaining grid axes and domains still expanded), then
passes over the grid until ``num_samples`` passes were made, the points counting as passes. A negative
``num_samples`` repeats forever (the run ends on its stop criteria or time budget).

Reproducibility and restore: variants are drawn from a generator seeded once (from
``random_state``, or from numpy's global state so ``np.random.seed`` fixes a search); the state
records the seed and how many variants were handed out, so a restored source skips those and
goes on with the ones that would have followed.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np

from nbdist.tune.search.sample import RandomState
from nbdist.tune.search.variant_generator import (
    count_spec_samples,
    format_vars,
    generate_variants,
    get_value,
    parse_spec_vars,
)

Variant = tuple[dict[str, Any], str]


class BasicVariantGenerator:
    """Ray's ``BasicVariantGenerator``: grid and random search over a ``param_space``."""

    CKPT_FILE_TMPL = "basic-variant-state-{}.json"

    def __init__(self, points_to_evaluate: list[dict[str, Any]] | None = None,
                 max_concurrent: int = 0, constant_grid_search: bool = False,
                 random_state: RandomState = None) -> None:
        self._points = [copy.deepcopy(p) for p in points_to_evaluate or []]
        self.max_concurrent = max_concurrent
        self._constant_grid_search = constant_grid_search
        self._seed = _seed_from(random_state)
        self._space: dict[str, Any] = {}
        self._num_samples = 1
        self._counter = 0
        self._live: set[str] = set()
        self._iter: Iterator[tuple[dict[Any, Any], dict[str, Any]]] | None = None
        self._next: tuple[dict[Any, Any], dict[str, Any]] | None = None
        self._exhausted = False

    def add_configurations(self, param_space: dict[str, Any] | None, num_samples: int = 1) -> None:
        """Set the space to expand; called once, before the first ``next_config``."""
        self._space = copy.deepcopy(param_space or {})
        self._num_samples = num_samples
        for point in self._points:
            _with_preset({"config": self._space}, point)  # a point the space lacks fails now
        self._restart(skip=0)

    def total(self) -> int | None:
        if self._num_samples < 0:
            return None
        spec = {"config": self._space}
        counted = sum(count_spec_samples(_with_preset(spec, p), 1) for p in self._points)
        return counted + count_spec_samples(spec, max(self._num_samples - len(self._points), 0))

    def next_config(self, trial_id: str) -> Variant | None:
        if self.max_concurrent and len(self._live) >= self.max_concurrent:
            return None
        if self._peek() is None:
            return None
        assert self._next is not None
        (resolved_vars, spec), self._next = self._next, None
        tag = str(self._counter)
        if resolved_vars:
            tag += "_" + format_vars(resolved_vars)
        self._counter += 1
        self._live.add(trial_id)
        return spec["config"], tag

    def finished(self) -> bool:
        return self._peek() is None

    def _peek(self) -> tuple[dict[Any, Any], dict[str, Any]] | None:
        # One variant is drawn ahead so that ``finished`` is exact even when functions in
        # the space produce grids nobody could count beforehand.
        if self._next is None and not self._exhausted:
            if self._iter is None:
                self._restart(skip=0)
            assert self._iter is not None
            try:
                self._next = next(self._iter)
            except StopIteration:
                self._exhausted = True
        return self._next

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        pass

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None,
                          error: bool = False) -> None:
        self._live.discard(trial_id)

    def get_state(self) -> dict[str, Any]:
        return {"seed": self._seed, "counter": self._counter, "num_samples": self._num_samples,
                "space": self._space, "points": self._points}

    def set_state(self, state: dict[str, Any]) -> None:
        self._seed = state["seed"]
        self._space = state["space"]
        self._num_samples = state["num_samples"]
        self._points = state["points"]
        self._restart(skip=state["counter"])

    def _restart(self, skip: int) -> None:
        rng = np.random.default_rng(self._seed)
        self._iter = self._variants(rng)
        self._next = None
        self._counter = skip
        self._exhausted = False
        self._live.clear()
        for _ in itertools.islice(self._iter, skip):
            pass

    def _variants(self, rng: np.random.Generator
                  ) -> Iterator[tuple[dict[Any, Any], dict[str, Any]]]:
        spec = {"config": self._space}
        passes: Iterator[int] = (itertools.count() if self._num_samples < 0
                                 else iter(range(max(self._num_samples, len(self._points)))))
        for index in passes:
            if index < len(self._points):
                variant_spec = _with_preset(spec, self._points[index])
            else:
                variant_spec = spec
            yield from generate_variants(variant_spec, self._constant_grid_search, rng)


def _with_preset(spec: dict[str, Any], point: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with a preset's values written over the space (a grid axis it sets is gone)."""
    spec = copy.deepcopy(spec)
    resolved, _, _ = parse_spec_vars(point)
    for path, value in resolved:
        try:
            get_value(spec["config"], path)
        except (KeyError, IndexError, TypeError) as exc:
            raise ValueError(
                f"points_to_evaluate sets {'/'.join(map(str, path))}, which the param_space "
                "does not have; add it to param_space") from exc
        target = spec["config"]
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return spec


def _seed_from(random_state: RandomState) -> int:
    if isinstance(random_state, int | np.integer):
        return int(random_state)
    if random_state is None:
        return int(np.random.randint(0, 2**31 - 1))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**31 - 1))
    return int(random_state.randint(0, 2**31 - 1))

"""When to stop trials or the whole search: Ray Tune's ``Stopper`` classes.

A stopper is asked after every result (``stopper(trial_id, result) -> bool`` stops that trial)
and then whether the search as a whole should end (``stop_all()``). ``RunConfig(stop=...)``
takes a ``Stopper``, a function of ``(trial_id, result)``, or a dict of criteria, each met when
the result's value reaches it (``{"training_iteration": 10, "mean_accuracy": 0.98}``).
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from typing import Any


class Stopper:
    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        raise NotImplementedError

    def stop_all(self) -> bool:
        return False


class NoopStopper(Stopper):
    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False


class FunctionStopper(Stopper):
    def __init__(self, function: Callable[[str, dict[str, Any]], bool]) -> None:
        self._fn = function

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return bool(self._fn(trial_id, result))


class DictStopper(Stopper):
    """Stops a trial once any criterion's metric reaches its value."""

    def __init__(self, criteria: Mapping[str, Any]) -> None:
        self.criteria = dict(criteria)

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        for key, value in self.criteria.items():
            got = _flat_get(result, key)
            if got is None:
                if key not in result:
                    raise KeyError(
                        f"stopping criterion {key!r} is not in the trial's result; it reported "
                        f"{sorted(k for k in result if not k.startswith('_'))}")
                continue
            if got >= value:
                return True
        return False


class CombinedStopper(Stopper):
    def __init__(self, *stoppers: Stopper) -> None:
        self._stoppers = stoppers

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return any([s(trial_id, result) for s in self._stoppers])

    def stop_all(self) -> bool:
        return any([s.stop_all() for s in self._stoppers])


class MaximumIterationStopper(Stopper):
    def __init__(self, max_iter: int) -> None:
        self._max_iter = max_iter
        self._iter: dict[str, int] = defaultdict(int)

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        self._iter[trial_id] += 1
        return self._iter[trial_id] >= self._max_iter


class TimeoutStopper(Stopper):
    """Ends the search ``timeout`` seconds (a number or a ``datetime.timedelta``) after it is
    built."""

    def __init__(self, timeout: Any) -> None:
        seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout
        self._deadline = time.monotonic() + float(seconds)

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False

    def stop_all(self) -> bool:
        return time.monotonic() >= self._deadline


class TrialPlateauStopper(Stopper):
    """Stops a trial when the standard deviation of its last ``num_results`` values of
    ``metric`` falls to ``std`` or below (after ``grace_period`` results)."""

    def __init__(self, metric: str, std: float = 0.01, num_results: int = 4,
                 grace_period: int = 4, metric_threshold: float | None = None,
                 mode: str | None = None) -> None:
        self._metric, self._std, self._num = metric, std, num_results
        self._grace, self._threshold, self._mode = grace_period, metric_threshold, mode
        self._seen: dict[str, int] = defaultdict(int)
        self._window: dict[str, deque[float]] = defaultdict(lambda: deque(maxlen=num_results))

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        value = float(result[self._metric])
        self._seen[trial_id] += 1
        self._window[trial_id].append(value)
        if self._seen[trial_id] < self._grace or len(self._window[trial_id]) < self._num:
            return False
        if self._threshold is not None:
            if self._mode == "min" and value > self._threshold:
                return False
            if self._mode == "max" and value < self._threshold:
                return False
        return statistics.pstdev(self._window[trial_id]) <= self._std


class ExperimentPlateauStopper(Stopper):
    """Ends the search when the best ``top`` values of ``metric`` stop moving (their standard
    deviation ≤ ``std``) for ``patience`` results."""

    def __init__(self, metric: str, std: float = 0.001, top: int = 10, mode: str = "min",
                 patience: int = 0) -> None:
        if mode not in ("min", "max"):
            raise ValueError("mode must be 'min' or 'max'")
        self._metric, self._std, self._top = metric, std, top
        self._mode, self._patience = mode, patience
        self._values: list[float] = []
        self._calm = 0
        self._stop = False

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        self._values.append(float(result[self._metric]))
        ordered = sorted(self._values, reverse=self._mode == "max")[:self._top]
        if len(ordered) == self._top and statistics.pstdev(ordered) <= self._std:
            self._calm += 1
        else:
            self._calm = 0
        self._stop = self._calm > self._patience
        return self._stop

    def stop_all(self) -> bool:
        return self._stop


def make_stopper(stop: Any) -> Stopper:
    if stop is None:
        return NoopStopper()
    if isinstance(stop, Stopper):
        return stop
    if isinstance(stop, Mapping):
        return DictStopper(stop)
    if callable(stop):
        return FunctionStopper(stop)
    raise ValueError(f"stop must be a dict, a function or a tune.Stopper, not "
                     f"{type(stop).__name__}")


def _flat_get(result: dict[str, Any], key: str) -> Any:
    """``result[key]``, where ``"a/b"`` also reaches into ``result["a"]["b"]``."""
    if key in result:
        return result[key]
    node: Any = result
    for part in key.split("/"):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node

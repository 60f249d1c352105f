"""The searcher interface (Ray Tune's ``Searcher``) and ``ConcurrencyLimiter``.

A searcher proposes configs one trial at a time and learns from their results; it holds no
processes and no clocks. The runner (through the trial source of ``search_generator``) calls:

- ``set_search_properties(metric, mode, config)`` once, with the ``param_space``; it returns
  False when the searcher cannot take them (a space was already given to its constructor);
- ``suggest(trial_id)`` for each trial it wants: a config dict, None for "nothing now, ask
  again later" (a searcher waiting for results), or ``Searcher.FINISHED``;
- ``on_trial_result(trial_id, result)`` per intermediate result and
  ``on_trial_complete(trial_id, result, error)`` once per suggested trial.

Custom searchers written for Ray subclass this one unchanged.
"""

from __future__ import annotations

import copy
import os
import pickle
from typing import Any

import cloudpickle

FINISHED = "FINISHED"


class Searcher:
    """Proposes configs and learns from their results; subclass and implement ``suggest``."""

    FINISHED = FINISHED
    CKPT_FILE_TMPL = "searcher-state-{}.pkl"

    def __init__(self, metric: str | list[str] | None = None,
                 mode: str | list[str] | None = None) -> None:
        _check_metric_and_mode(metric, mode)
        self._metric: Any = metric
        self._mode: Any = mode

    @property
    def metric(self) -> Any:
        return self._metric

    @property
    def mode(self) -> Any:
        return self._mode

    def set_search_properties(self, metric: str | None, mode: str | None,
                              config: dict[str, Any], **spec: Any) -> bool:
        """Take the run's metric, mode and space; False if this searcher cannot."""
        return False

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        """True if the searcher limits concurrency itself (``ConcurrencyLimiter`` then doesn't)."""
        return False

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        raise NotImplementedError

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        pass

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None,
                          error: bool = False) -> None:
        raise NotImplementedError

    def add_evaluated_point(self, parameters: dict[str, Any], value: float, error: bool = False,
                            pruned: bool = False,
                            intermediate_values: list[float] | None = None) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} cannot be told of points evaluated outside the search")

    def get_state(self) -> dict[str, Any]:
        raise NotImplementedError

    def set_state(self, state: dict[str, Any]) -> None:
        raise NotImplementedError

    def save(self, checkpoint_path: str) -> None:
        # cloudpickle: states may hold user functions (a define-by-run space, a lambda).
        with open(checkpoint_path, "wb") as f:
            cloudpickle.dump(self.get_state(), f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            self.set_state(pickle.load(f))

    def save_to_dir(self, checkpoint_dir: str, session_str: str = "default") -> None:
        self.save(os.path.join(checkpoint_dir, self.CKPT_FILE_TMPL.format(session_str)))

    def restore_from_dir(self, checkpoint_dir: str) -> None:
        names = sorted(n for n in os.listdir(checkpoint_dir)
                       if n.startswith(self.CKPT_FILE_TMPL.split("{}")[0]))
        if not names:
            raise RuntimeError(f"no searcher state found in {checkpoint_dir}")
        self.restore(os.path.join(checkpoint_dir, names[-1]))


class ConcurrencyLimiter(Searcher):
    """Caps how many suggested trials are live at once (``batch``: wait for all to finish)."""

    def __init__(self, searcher: Searcher, max_concurrent: int, batch: bool = False) -> None:
        if not isinstance(searcher, Searcher):
            raise TypeError(
                f"ConcurrencyLimiter wraps a Searcher, got {type(searcher).__name__}")
        if not isinstance(max_concurrent, int) or max_concurrent < 1:
            raise ValueError(f"max_concurrent must be a positive int, got {max_concurrent!r}")
        super().__init__(metric=searcher.metric, mode=searcher.mode)
        self.searcher = searcher
        self.max_concurrent = max_concurrent
        self.batch = batch
        self.live_trials: set[str] = set()
        self.num_unfinished_live_trials = 0
        self.cached_results: dict[str, tuple[dict[str, Any] | None, bool]] = {}
        self._limit_concurrency = True

    @property
    def metric(self) -> str | None:
        return self.searcher.metric

    @property
    def mode(self) -> str | None:
        return self.searcher.mode

    def set_search_properties(self, metric: str | None, mode: str | None,
                              config: dict[str, Any], **spec: Any) -> bool:
        self._limit_concurrency = not self.searcher.set_max_concurrency(self.max_concurrent)
        return self.searcher.set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        if not self._limit_concurrency:
            return self.searcher.suggest(trial_id)
        if trial_id in self.live_trials:
            raise ValueError(f"trial id {trial_id} was suggested already; ids must be unique")
        if len(self.live_trials) >= self.max_concurrent:
            return None
        suggestion = self.searcher.suggest(trial_id)
        if suggestion is not None and suggestion != Searcher.FINISHED:
            self.live_trials.add(trial_id)
            self.num_unfinished_live_trials += 1
        return suggestion

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        self.searcher.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None,
                          error: bool = False) -> None:
        if not self._limit_concurrency:
            self.searcher.on_trial_complete(trial_id, result=result, error=error)
            return
        if trial_id not in self.live_trials:
            return
        self.num_unfinished_live_trials -= 1
        if not self.batch:
            self.searcher.on_trial_complete(trial_id, result=result, error=error)
            self.live_trials.remove(trial_id)
            return
        # A batch is reported to the searcher together, once its last trial is done, and only
        # then are new suggestions allowed.
        self.cached_results[trial_id] = (result, error)
        if self.num_unfinished_live_trials > 0:
            return
        for done_id, (done_result, done_error) in self.cached_results.items():
            self.searcher.on_trial_complete(done_id, result=done_result, error=done_error)
            self.live_trials.discard(done_id)
        self.cached_results = {}
        self.num_unfinished_live_trials = 0

    def add_evaluated_point(self, parameters: dict[str, Any], value: float, error: bool = False,
                            pruned: bool = False,
                            intermediate_values: list[float] | None = None) -> None:
        self.searcher.add_evaluated_point(parameters, value, error, pruned, intermediate_values)

    def get_state(self) -> dict[str, Any]:
        state = copy.deepcopy({k: v for k, v in self.__dict__.items() if k != "searcher"})
        state["searcher_state"] = _state_or_none(self.searcher)
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        state = dict(state)
        searcher_state = state.pop("searcher_state", None)
        self.__dict__.update(state)
        if searcher_state is not None:
            self.searcher.set_state(searcher_state)


def _check_metric_and_mode(metric: Any, mode: Any) -> None:
    """Ray's rule: one metric with "min" or "max", or (multi-objective searchers such as
    Optuna's) a list of metrics with a list of modes of the same length."""
    if isinstance(mode, list):
        if metric is not None and (not isinstance(metric, list) or len(metric) != len(mode)):
            raise ValueError(f"a list of modes ({mode!r}) needs a list of as many metrics, got "
                             f"{metric!r}")
        if any(m not in ("min", "max", "obs") for m in mode):
            raise ValueError(f"each mode must be 'min', 'max' or 'obs', got {mode!r}")
    elif mode is not None and mode not in ("min", "max"):
        raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")


def _state_or_none(searcher: Searcher) -> dict[str, Any] | None:
    try:
        return searcher.get_state()
    except NotImplementedError:
        return None

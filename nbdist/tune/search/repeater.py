"""``Repeater``: run each suggested config ``repeat`` times and report the mean (Ray's).

For noisy objectives: the wrapped searcher sees one trial per config (the group's first id),
completed once every repetition has finished, with ``{metric: nanmean(scores)}``. With
``set_index`` each repetition's config carries ``"__trial_index__"`` (0 .. repeat-1), e.g. to
seed it differently. Use ``num_samples`` as a multiple of ``repeat``.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from nbdist.tune.search.searcher import Searcher

TRIAL_INDEX = "__trial_index__"


class _TrialGroup:
    """The trials running one config, and their scores once complete."""

    def __init__(self, primary_trial_id: str, config: dict[str, Any], max_trials: int) -> None:
        self.primary_trial_id = primary_trial_id
        self.config = config
        self._scores: dict[str, float | None] = {primary_trial_id: None}
        self.max_trials = max_trials

    def add(self, trial_id: str) -> None:
        assert len(self._scores) < self.max_trials
        self._scores[trial_id] = None

    def full(self) -> bool:
        return len(self._scores) == self.max_trials

    def count(self) -> int:
        return len(self._scores)

    def report(self, trial_id: str, score: float) -> None:
        self._scores[trial_id] = score

    def finished_reporting(self) -> bool:
        return self.full() and all(s is not None for s in self._scores.values())

    def scores(self) -> list[float]:
        return [s for s in self._scores.values() if s is not None]


class Repeater(Searcher):
    """Ray's ``Repeater(searcher, repeat=1, set_index=True)``."""

    def __init__(self, searcher: Searcher, repeat: int = 1, set_index: bool = True) -> None:
        if not isinstance(searcher, Searcher):
            raise TypeError(f"Repeater wraps a Searcher, got {type(searcher).__name__}")
        super().__init__(metric=searcher.metric, mode=searcher.mode)
        self.searcher = searcher
        self.repeat = repeat
        self._set_index = set_index
        self._groups: list[_TrialGroup] = []
        self._trial_id_to_group: dict[str, _TrialGroup] = {}
        self._current_group: _TrialGroup | None = None

    @property
    def metric(self) -> str | None:
        return self.searcher.metric

    @property
    def mode(self) -> str | None:
        return self.searcher.mode

    def set_search_properties(self, metric: str | None, mode: str | None,
                              config: dict[str, Any], **spec: Any) -> bool:
        return self.searcher.set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        if self._current_group is None or self._current_group.full():
            config = self.searcher.suggest(trial_id)
            if config is None or config == Searcher.FINISHED:
                return config
            assert isinstance(config, dict)
            self._current_group = _TrialGroup(trial_id, copy.deepcopy(config), self.repeat)
            self._groups.append(self._current_group)
            index = 0
        else:
            index = self._current_group.count()
            self._current_group.add(trial_id)
        self._trial_id_to_group[trial_id] = self._current_group
        config = copy.deepcopy(self._current_group.config)
        if self._set_index:
            config[TRIAL_INDEX] = index
        return config

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        pass  # the searcher learns from the group's mean only

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None,
                          error: bool = False) -> None:
        group = self._trial_id_to_group.get(trial_id)
        if group is None:
            return
        metric = self.searcher.metric
        score = (result or {}).get(metric) if metric else None
        group.report(trial_id, np.nan if score is None else float(score))
        if group.finished_reporting():
            assert metric is not None
            scores = group.scores()
            mean = float(np.nanmean(scores)) if not np.all(np.isnan(scores)) else None
            self.searcher.on_trial_complete(
                group.primary_trial_id, result=None if mean is None else {metric: mean},
                error=mean is None)

    def get_state(self) -> dict[str, Any]:
        state = copy.deepcopy({k: v for k, v in self.__dict__.items() if k != "searcher"})
        try:
            state["searcher_state"] = self.searcher.get_state()
        except NotImplementedError:
            state["searcher_state"] = None
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        state = dict(state)
        searcher_state = state.pop("searcher_state", None)
        self.__dict__.update(state)
        if searcher_state is not None:
            self.searcher.set_state(searcher_state)

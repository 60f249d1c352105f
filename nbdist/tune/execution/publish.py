"""The progress records of a search on nbdist's event stream (``RunUpdate``, library "tune").

One record per report and per change of a trial's status, folded by the notebook's Trials
view by ``(run, member)``: ``run`` is the search's name, made unique within this driver so two
``fit()`` calls never share a view; ``member`` the trial id.
"""

from __future__ import annotations

import numbers
import time
from typing import Any

import nbdist.events

_AUTO = frozenset({
    "training_iteration", "trial_id", "time_this_iter_s", "time_since_restore",
    "iterations_since_restore", "timestamp", "date", "pid", "hostname", "node_ip", "done",
    "config", "checkpoint_dir_name"})
_names: dict[str, int] = {}
_announced: set[str] = set()


def unique_run_name(name: str) -> str:
    seen = _names.get(name, 0)
    _names[name] = seen + 1
    return name if not seen else f"{name} #{seen + 1}"


def metrics_of(result: dict[str, Any]) -> tuple[tuple[str, float], ...]:
    out = []
    for key, value in _flat(result):
        if key not in _AUTO and isinstance(value, numbers.Real) and not isinstance(value, bool):
            out.append((key, float(value)))
    return tuple(out)


def config_of(params: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple((key.replace("/", "."), _short(value)) for key, value in params.items())


def trial(controller: Any, trial: Any, *, note: str = "", status: str | None = None) -> None:
    nbdist.events.publish(nbdist.events.RunUpdate(
        time.time(), "tune", run=controller.run_name, member=trial.trial_id,
        status=status or trial.status, iteration=trial.iteration,
        metrics=metrics_of(trial.last_result), config=config_of(trial.evaluated_params),
        note=note))
    if controller.run_name not in _announced:
        # The run's first record reaches its views now, not at the next batch: a view opens
        # in the cell that called fit() before the search's output starts.
        _announced.add(controller.run_name)
        nbdist.events.bus().flush()


def _flat(result: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in result.items():
        if isinstance(value, dict):
            if not prefix and key == "config":
                continue
            out.extend(_flat(value, f"{prefix}{key}/"))
        else:
            out.append((f"{prefix}{key}", value))
    return out


def _short(value: Any) -> str:
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."

"""What ``Tuner.fit`` returns: a ``Result`` per trial, in a ``ResultGrid``."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nbdist.tune.checkpoint import Checkpoint
from nbdist.tune.error import TrialError, TuneError

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class Result:
    metrics: dict[str, Any] | None
    checkpoint: Checkpoint | None
    error: BaseException | None
    path: str
    best_checkpoints: list[tuple[Checkpoint, dict[str, Any]]] = field(default_factory=list)
    status: str = ""
    history: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def metrics_dataframe(self) -> pd.DataFrame | None:
        """Every report of the trial, one row each (pandas is imported on first use)."""
        if not self.history:
            return None
        import pandas as pd

        return pd.DataFrame([{k: v for k, v in r.items() if k != "config"}
                             for r in self.history])

    @property
    def config(self) -> dict[str, Any] | None:
        return None if self.metrics is None else self.metrics.get("config")

    def __repr__(self) -> str:
        shown = {k: v for k, v in (self.metrics or {}).items()
                 if k not in ("config", "date", "hostname", "pid", "timestamp")}
        parts = [f"metrics={shown}", f"path={self.path!r}", f"checkpoint={self.checkpoint}"]
        if self.error is not None:
            parts.append(f"error={type(self.error).__name__}")
        return f"Result({', '.join(parts)})"


def result_of(trial: Any) -> Result:
    error: BaseException | None = None
    if trial.error is not None:
        error = TrialError(trial.trial_id, trial.error, getattr(trial, "error_cause", None))
    metrics = dict(trial.last_result) if trial.last_result else {"config": trial.config}
    metrics.setdefault("config", trial.config)
    return Result(metrics=metrics, checkpoint=trial.checkpoint, error=error,
                  path=trial.local_path, best_checkpoints=list(trial.checkpoints),
                  status=trial.status, history=list(trial.results))


class ResultGrid:
    """The results of a search, one per trial, in the order trials were created."""

    def __init__(self, results: list[Result], *, metric: str | None = None,
                 mode: str | None = None, experiment_path: str = "",
                 trials: list[Any] | None = None) -> None:
        self._results = results
        self._metric = metric
        self._mode = mode
        self.experiment_path = experiment_path
        self._trials = trials or []

    def get_best_result(self, metric: str | None = None, mode: str | None = None,
                        scope: str = "last", filter_nan_and_inf: bool = True) -> Result:
        """The trial with the best ``metric`` (its last value; ``scope="all"``: its best one,
        ``"last-5-avg"``/``"avg"`` as in Ray)."""
        metric = metric or self._metric
        mode = mode or self._mode
        if not metric or not mode:
            raise ValueError("get_best_result needs a metric and a mode, given here or in "
                             "TuneConfig(metric=..., mode=...)")
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        scored = []
        for result in self._results:
            value = _score(result, metric, mode, scope)
            if value is None or (filter_nan_and_inf and not math.isfinite(value)):
                continue
            scored.append((value, result))
        if not scored:
            raise RuntimeError(f"no trial reported a finite {metric!r}: the best result is "
                               "undefined (check the metric's name and the trials' errors)")
        pick = max if mode == "max" else min
        return pick(scored, key=lambda vr: vr[0])[1]

    def get_dataframe(self, filter_metric: str | None = None,
                      filter_mode: str | None = None) -> pd.DataFrame:
        """One row per trial: its last result (or its best by ``filter_metric``), config
        flattened into ``config/...`` columns, plus ``logdir``."""
        import pandas as pd

        rows = []
        for result in self._results:
            row = dict(result.metrics or {})
            frame = result.metrics_dataframe if filter_metric else None
            if frame is not None and filter_metric in frame:
                i = frame[filter_metric].idxmax() if filter_mode != "min" else \
                    frame[filter_metric].idxmin()
                row = {**row, **frame.loc[i].to_dict()}
            config = row.pop("config", None) or {}
            row.update({f"config/{k}": v for k, v in _flat(config).items()})
            row["logdir"] = result.path
            rows.append(row)
        return pd.DataFrame(rows)

    @property
    def errors(self) -> list[BaseException]:
        return [r.error for r in self._results if r.error is not None]

    @property
    def num_errors(self) -> int:
        return len(self.errors)

    @property
    def num_terminated(self) -> int:
        return sum(1 for r in self._results if r.status == "TERMINATED")

    def __len__(self) -> int:
        return len(self._results)

    def __getitem__(self, i: int) -> Result:
        return self._results[i]

    def __iter__(self) -> Iterator[Result]:
        return iter(self._results)

    def __repr__(self) -> str:
        return "ResultGrid<[\n" + ",\n".join(f"  {r!r}" for r in self._results) + "\n]>"


def _score(result: Result, metric: str, mode: str, scope: str) -> float | None:
    if scope == "last" or not result.history:
        value: Any = result.metrics or {}
        for part in [metric] if metric in value else metric.split("/"):  # nested: "a/b"
            value = value.get(part) if isinstance(value, dict) else None
        return None if value is None else float(value)
    frame = result.metrics_dataframe
    if frame is None or metric not in frame:
        return None
    column = frame[metric].dropna()
    if column.empty:
        return None
    if scope == "all":
        return float(column.max() if mode == "max" else column.min())
    if scope == "avg":
        return float(column.mean())
    if scope.startswith("last-") and scope.endswith("-avg"):
        return float(column.tail(int(scope[5:-4])).mean())
    raise TuneError(f"scope must be 'last', 'all', 'avg' or 'last-N-avg', got {scope!r}")


def _flat(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}/"))
        else:
            out[f"{prefix}{key}"] = value
    return out

"""Ray Tune's progress reporters: a status table of the search's trials, printed while it runs.

``tune.run(progress_reporter=...)`` or ``RunConfig(progress_reporter=...)`` takes one in place of
the one-line status (`progress.ProgressCallback`). A reporter is asked ``should_report(trials)``
after each step of the search and prints ``report(trials, done)`` when it says yes (at most every
``max_report_frequency`` seconds, and whenever a trial's status changed), and once more at the
end. ``JupyterNotebookReporter`` prints the same text: in a kernel, the notebook's live view of
the search is there beside it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Collection, Mapping
from typing import Any

from nbdist.tune.callback import Callback

# What a table shows when the reporter is not told which metrics to show: those of these that
# the trials report (key -> column heading), then the search's own metric.
DEFAULT_COLUMNS = {"training_iteration": "iter", "time_total_s": "total time (s)",
                   "timesteps_total": "ts", "episode_reward_mean": "reward"}
STATUS_ORDER = ("RUNNING", "PENDING", "PAUSED", "TERMINATED", "ERROR")


class ProgressReporter:
    """The interface a reporter offers: whether to report now, and the report."""

    def setup(self, start_time: float | None = None, total_samples: int | None = None,
              metric: str | None = None, mode: str | None = None, **kwargs: Any) -> None:
        pass

    def should_report(self, trials: list[Any], done: bool = False) -> bool:
        raise NotImplementedError

    def report(self, trials: list[Any], done: bool, *sys_info: str) -> None:
        raise NotImplementedError


def _columns(spec: Collection[str] | Mapping[str, str] | None) -> dict[str, str]:
    if spec is None:
        return {}
    if isinstance(spec, Mapping):
        return {str(k): str(v) for k, v in spec.items()}
    return {str(k): str(k) for k in spec}


class TuneReporterBase(ProgressReporter):
    """A status table: a header with the counts, then a row per trial."""

    def __init__(self, *, metric_columns: Collection[str] | Mapping[str, str] | None = None,
                 parameter_columns: Collection[str] | Mapping[str, str] | None = None,
                 total_samples: int | None = None, max_progress_rows: int = 20,
                 max_error_rows: int = 20, max_column_length: int = 20,
                 max_report_frequency: float = 5, infer_limit: int = 3,
                 print_intermediate_tables: bool | None = None, metric: str | None = None,
                 mode: str | None = None, sort_by_metric: bool = False) -> None:
        if mode not in (None, "min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        self.metric_columns = _columns(metric_columns)
        self.parameter_columns = _columns(parameter_columns)
        self.total_samples = total_samples
        self.max_progress_rows = max_progress_rows
        self.max_error_rows = max_error_rows
        self.max_column_length = max_column_length
        self.max_report_frequency = max_report_frequency
        self.infer_limit = infer_limit
        self.print_intermediate_tables = print_intermediate_tables
        self.metric, self.mode, self.sort_by_metric = metric, mode, sort_by_metric
        self.start_time = time.time()
        self._last_report = 0.0
        self._last_states: tuple[str, ...] = ()

    def setup(self, start_time: float | None = None, total_samples: int | None = None,
              metric: str | None = None, mode: str | None = None, **kwargs: Any) -> None:
        self.start_time = start_time or self.start_time
        self.total_samples = self.total_samples or total_samples
        self.metric = self.metric or metric
        self.mode = self.mode or mode

    def add_metric_column(self, metric: str, representation: str | None = None) -> None:
        if metric in self.metric_columns:
            raise ValueError(f"Column {metric!r} is already shown.")
        self.metric_columns[metric] = representation or metric

    def add_parameter_column(self, parameter: str, representation: str | None = None) -> None:
        if parameter in self.parameter_columns:
            raise ValueError(f"Column {parameter!r} is already shown.")
        self.parameter_columns[parameter] = representation or parameter

    def should_report(self, trials: list[Any], done: bool = False) -> bool:
        states = tuple(t.status for t in trials)
        changed = states != self._last_states
        due = time.time() - self._last_report >= self.max_report_frequency
        if done or changed or due:
            self._last_states = states
            self._last_report = time.time()
            return True
        return False

    def report(self, trials: list[Any], done: bool, *sys_info: str) -> None:
        print(self._progress_str(trials, done, *sys_info), flush=True)

    def _progress_str(self, trials: list[Any], done: bool, *sys_info: str) -> str:
        lines = ["== Status ==", self._header(trials), *sys_info]
        lines += self._table(trials)
        errors = [t for t in trials if t.status == "ERROR"][:self.max_error_rows]
        if errors:
            lines.append(f"Number of errored trials: {len(errors)}")
            lines += [f"  {t}: {t.error_file or t.error}" for t in errors]
        if done:
            lines.append("Search done.")
        return "\n".join(lines) + "\n"

    def _header(self, trials: list[Any]) -> str:
        counts = {s: sum(t.status == s for t in trials) for s in STATUS_ORDER}
        states = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        total = f"/{self.total_samples}" if self.total_samples else ""
        elapsed = time.strftime("%H:%M:%S", time.gmtime(time.time() - self.start_time))
        best = self._best(trials)
        return (f"Current time: {time.strftime('%Y-%m-%d %H:%M:%S')} (running for {elapsed})\n"
                f"Number of trials: {len(trials)}{total} ({states})" + best)

    def _best(self, trials: list[Any]) -> str:
        if not self.metric or not self.mode:
            return ""
        scored = [t for t in trials if isinstance(t.last_result.get(self.metric), (int, float))]
        if not scored:
            return ""
        pick = max if self.mode == "max" else min
        best = pick(scored, key=lambda t: t.last_result[self.metric])
        return (f"\nCurrent best trial: {best} with {self.metric}="
                f"{best.last_result[self.metric]} and params={best.evaluated_params}")

    def _shown_metrics(self, trials: list[Any]) -> dict[str, str]:
        if self.metric_columns:
            return self.metric_columns
        reported = {k for t in trials for k in t.last_result}
        shown = {k: v for k, v in DEFAULT_COLUMNS.items() if k in reported}
        if self.metric and self.metric in reported:
            shown.setdefault(self.metric, self.metric)
        extra = sorted(k for k in reported if k not in shown and not k.startswith(
            ("time_", "timestamp", "date", "trial_id", "pid", "hostname", "node_ip", "config",
             "done", "iterations_since", "experiment_tag", "checkpoint_dir")))
        for key in extra[:max(0, self.infer_limit)]:
            shown[key] = key
        return shown

    def _table(self, trials: list[Any]) -> list[str]:
        params = self.parameter_columns or {k: k for t in trials for k in t.evaluated_params}
        metrics = self._shown_metrics(trials)
        rows = sorted(trials, key=lambda t: STATUS_ORDER.index(t.status)
                      if t.status in STATUS_ORDER else len(STATUS_ORDER))
        if self.sort_by_metric and self.metric and self.mode:
            sign = -1 if self.mode == "max" else 1
            rows.sort(key=lambda t: sign * _number(t.last_result.get(self.metric)))
        hidden = max(0, len(rows) - self.max_progress_rows)
        rows = rows[:self.max_progress_rows]
        head = ["Trial name", "status", *params.values(), *metrics.values()]
        body = [[str(t), t.status,
                 *(self._cell(_param(t, k)) for k in params),
                 *(self._cell(t.last_result.get(k)) for k in metrics)] for t in rows]
        widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
        out = [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))
               for r in [head, *body]]
        out.insert(1, "-+-".join("-" * w for w in widths))
        if hidden:
            out.append(f"... {hidden} more trials not shown")
        return out

    def _cell(self, value: Any) -> str:
        if value is None:
            return ""
        text = f"{value:.5g}" if isinstance(value, float) else str(value)
        limit = self.max_column_length
        return text if len(text) <= limit else text[:max(1, limit - 3)] + "..."


def _param(trial: Any, key: str) -> Any:
    if key in trial.evaluated_params:
        return trial.evaluated_params[key]
    value: Any = trial.config
    for part in key.split("/"):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else float("inf")


class CLIReporter(TuneReporterBase):
    """The status table as text on standard output."""


class JupyterNotebookReporter(TuneReporterBase):
    """The status table as text; ``overwrite`` is accepted (the notebook's live view of the
    search is the one that updates in place)."""

    def __init__(self, *, overwrite: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.overwrite = overwrite


class ReporterCallback(Callback):
    """Drives a reporter from the search's callbacks (installed by the Tuner)."""

    def __init__(self, reporter: Any, metric: str | None, mode: str | None) -> None:
        if not callable(getattr(reporter, "should_report", None)) or not callable(
                getattr(reporter, "report", None)):
            raise TypeError("progress_reporter must have should_report(trials, done) and "
                            f"report(trials, done, *sys_info), as tune.CLIReporter; got "
                            f"{reporter!r}")
        self.reporter = reporter
        self.metric, self.mode = metric, mode

    def setup(self, stop: Any = None, num_samples: int | None = None,
              total_num_samples: int | None = None, **info: Any) -> None:
        setup = getattr(self.reporter, "setup", None)
        if callable(setup):
            setup(start_time=time.time(), total_samples=total_num_samples,
                  metric=self.metric, mode=self.mode)

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        if self.reporter.should_report(trials, done=False):
            self.reporter.report(trials, False)

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        self.reporter.report(trials, True)
        sys.stdout.flush()

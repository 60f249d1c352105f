"""The compact text status of a search in a script (``RunConfig(verbose=...)``).

Ray's levels: 0 nothing; 1 a line per change of a trial's status and a closing summary; 2 (and
more) also a line per result. One line each, never boxes or tables, so a log stays readable.
Not used inside an IPython kernel, where the notebook's live view shows the same.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from nbdist.tune.callback import Callback


class ProgressCallback(Callback):
    def __init__(self, verbose: int, metric: str | None = None, out: Any = None) -> None:
        self.verbose = verbose
        self.metric = metric
        self.out = out
        self.started = time.monotonic()

    def say(self, text: str) -> None:
        out = self.out or sys.stdout
        out.write(text + "\n")
        out.flush()

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any,
                       **info: Any) -> None:
        params = ", ".join(f"{k}={_short(v)}" for k, v in trial.evaluated_params.items())
        self.say(f"Trial {trial.trial_id} RUNNING  {params}")

    def on_trial_result(self, iteration: int, trials: list[Any], trial: Any,
                        result: dict[str, Any], **info: Any) -> None:
        if self.verbose >= 2:
            self.say(f"Trial {trial.trial_id} iter {result.get('training_iteration')}  "
                     f"{self.metrics(result)}")

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any,
                          **info: Any) -> None:
        why = f"  ({trial.stopping})" if trial.stopping else ""
        self.say(f"Trial {trial.trial_id} TERMINATED after {trial.iteration} iterations  "
                 f"{self.metrics(trial.last_result)}{why}")

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any,
                       **info: Any) -> None:
        last = (trial.error or "").strip().splitlines()[-1:] or [""]
        self.say(f"Trial {trial.trial_id} ERROR  {last[0]}  (traceback in {trial.error_file})")

    def on_trial_recover(self, iteration: int, trials: list[Any], trial: Any,
                         **info: Any) -> None:
        self.say(f"Trial {trial.trial_id} failed, restarting (failure {trial.num_failures})")

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        counts: dict[str, int] = {}
        for trial in trials:
            counts[trial.status] = counts.get(trial.status, 0) + 1
        states = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        self.say(f"Search done: {len(trials)} trials ({states}) in "
                 f"{time.monotonic() - self.started:.1f} s")

    def metrics(self, result: dict[str, Any]) -> str:
        from nbdist.tune.execution.publish import metrics_of

        shown = metrics_of(result)
        if self.metric:
            shown = tuple(sorted(shown, key=lambda kv: kv[0] != self.metric))
        return " ".join(f"{k}={v:.4g}" for k, v in shown[:4])


def _short(value: Any) -> str:
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    return text if len(text) <= 30 else text[:27] + "..."

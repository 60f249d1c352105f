"""``tune.logger``: ``LoggerCallback`` and loggers writing each trial's results to its
directory (JSON lines, CSV). The runner itself already writes ``params.json`` and
``result.json``; these are for extra formats and for users' own loggers."""

from __future__ import annotations

import csv
import json
import os
from typing import IO, Any

from nbdist.tune.callback import Callback


class LoggerCallback(Callback):
    """A callback that logs per trial: override ``log_trial_start``, ``log_trial_result`` and
    ``log_trial_end``."""

    def log_trial_start(self, trial: Any) -> None:
        pass

    def log_trial_restore(self, trial: Any) -> None:
        pass

    def log_trial_save(self, trial: Any) -> None:
        pass

    def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
        pass

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        pass

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any,
                       **info: Any) -> None:
        self.log_trial_start(trial)

    def on_trial_restore(self, iteration: int, trials: list[Any], trial: Any,
                         **info: Any) -> None:
        self.log_trial_restore(trial)

    def on_trial_save(self, iteration: int, trials: list[Any], trial: Any,
                      **info: Any) -> None:
        self.log_trial_save(trial)

    def on_trial_result(self, iteration: int, trials: list[Any], trial: Any,
                        result: dict[str, Any], **info: Any) -> None:
        self.log_trial_result(iteration, trial, result)

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any,
                          **info: Any) -> None:
        self.log_trial_end(trial, failed=False)

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any,
                       **info: Any) -> None:
        self.log_trial_end(trial, failed=True)


def _plain(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k != "config"}


class CSVLoggerCallback(LoggerCallback):
    """``progress.csv`` in each trial's directory: one row per result."""

    def __init__(self) -> None:
        self._files: dict[str, tuple[IO[str], Any]] = {}

    def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
        row = {k: v for k, v in _plain(result).items() if not isinstance(v, dict)}
        if trial.trial_id not in self._files:
            f = open(os.path.join(trial.local_path, "progress.csv"), "a", newline="")
            writer = csv.DictWriter(f, fieldnames=list(row), extrasaction="ignore")
            if f.tell() == 0:
                writer.writeheader()
            self._files[trial.trial_id] = (f, writer)
        out, writer = self._files[trial.trial_id]
        writer.writerow(row)
        out.flush()

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        entry = self._files.pop(trial.trial_id, None)
        if entry is not None:
            entry[0].close()


class JsonLoggerCallback(LoggerCallback):
    """``result.json`` lines in each trial's directory (the runner writes these already; kept
    for code that adds it explicitly, it writes to ``result_extra.json`` to not double them)."""

    def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
        with open(os.path.join(trial.local_path, "result_extra.json"), "a") as f:
            f.write(json.dumps(_plain(result), default=str) + "\n")

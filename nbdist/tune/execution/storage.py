"""What a search leaves on disk, and reading it back for ``Tuner.restore``.

    <storage_path>/<name>/
        tuner.pkl                 the Tuner's arguments (param space, configs), not the trainable
        experiment_state.pkl      every trial's record (config, status, last result, checkpoints,
                                  failures) and the search algorithm's state; rewritten
                                  atomically on status changes and at most once a second
        <trial dir>/params.json   the trial's config (params.pkl when it is not JSON)
        <trial dir>/result.json   one JSON line per report
        <trial dir>/error.txt     the traceback of its last failure
        <trial dir>/checkpoint_000000/ ...   written by the trial's actor

Written only by the driver's controller thread, except checkpoint directories, which the trial's
actor writes before its report reaches the driver.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import IO, Any

import cloudpickle
import numpy as np

STATE_FILE = "experiment_state.pkl"
TUNER_FILE = "tuner.pkl"
STATE_INTERVAL_S = 1.0


def json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return repr(value)


def safe_dirname(name: str, limit: int = 120) -> str:
    name = re.sub(r"[^\w.,=+-]", "_", name)
    return name[:limit]


class ExperimentStorage:
    def __init__(self, storage_path: str, name: str) -> None:
        self.storage_path = os.path.abspath(os.path.expanduser(storage_path))
        self.name = name
        self.path = os.path.join(self.storage_path, name)
        os.makedirs(self.path, exist_ok=True)
        self._results: dict[str, IO[str]] = {}
        self._state_at = 0.0

    def trial_dir(self, trial: Any, dirname: str) -> str:
        path = os.path.join(self.path, safe_dirname(dirname))
        os.makedirs(path, exist_ok=True)
        trial.local_path = path
        trial.relative_logdir = os.path.basename(path)
        return path

    def write_params(self, trial: Any) -> None:
        try:
            text = json.dumps(trial.config, indent=2, sort_keys=True, default=json_default)
        except (TypeError, ValueError):
            text = json.dumps({k: repr(v) for k, v in trial.config.items()}, indent=2)
        with open(os.path.join(trial.local_path, "params.json"), "w") as f:
            f.write(text)
        with open(os.path.join(trial.local_path, "params.pkl"), "wb") as f:
            cloudpickle.dump(trial.config, f)

    def append_result(self, trial: Any, result: dict[str, Any]) -> None:
        f = self._results.get(trial.trial_id)
        if f is None:
            f = self._results[trial.trial_id] = open(
                os.path.join(trial.local_path, "result.json"), "a")
        f.write(json.dumps(result, default=json_default) + "\n")

    def flush(self) -> None:
        for f in self._results.values():
            f.flush()

    def close_trial(self, trial: Any) -> None:
        f = self._results.pop(trial.trial_id, None)
        if f is not None:
            f.close()

    def write_error(self, trial: Any, text: str) -> str:
        path = os.path.join(trial.local_path, "error.txt")
        with open(path, "a") as f:
            f.write(text.rstrip() + "\n")
        return path

    def save_tuner(self, state: dict[str, Any]) -> None:
        self._atomic(TUNER_FILE, cloudpickle.dumps(state))

    def save_state(self, state: dict[str, Any], force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._state_at < STATE_INTERVAL_S:
            return
        self._state_at = now
        self.flush()
        self._atomic(STATE_FILE, cloudpickle.dumps(state))

    def close(self) -> None:
        for f in self._results.values():
            f.close()
        self._results.clear()

    def _atomic(self, name: str, data: bytes) -> None:
        tmp = os.path.join(self.path, f".{name}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(self.path, name))


def load(path: str, name: str) -> Any:
    with open(os.path.join(path, name), "rb") as f:
        return cloudpickle.load(f)


def read_results(trial_dir: str) -> list[dict[str, Any]]:
    try:
        with open(os.path.join(trial_dir, "result.json")) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []

"""Reading a search back from its storage directory, for ``Tuner.restore``."""

from __future__ import annotations

import os
from typing import Any

from nbdist.tune.error import TuneError
from nbdist.tune.execution import storage as _storage
from nbdist.tune.experiment.trial import Trial


def restored_search(path: str, trainable: Any, name: str, *, resume_unfinished: bool,
                    resume_errored: bool, restart_errored: bool,
                    param_space: dict[str, Any] | None) -> tuple:
    """The fields of the stored search, in `nbdist.tune.tuner.Search`'s order."""
    try:
        tuner = _storage.load(path, _storage.TUNER_FILE)
        state = _storage.load(path, _storage.STATE_FILE)
    except FileNotFoundError as exc:
        raise TuneError(f"{path} holds no search to restore ({exc.filename} is missing); "
                        "pass the experiment directory, storage_path/name") from exc
    trials = []
    for record in state["trials"]:
        trial = Trial(**{k: v for k, v in record.items() if k in _FIELDS})
        trial.results = _storage.read_results(trial.local_path)
        trials.append(trial)
    trials = reset_unfinished(trials, resume_unfinished=resume_unfinished,
                              resume_errored=resume_errored, restart_errored=restart_errored)
    return (trainable, name, param_space if param_space is not None else
            tuner["param_space"], tuner["tune_config"], tuner["run_config"],
            tuner.get("resources"), trials, state["source"], state["counter"],
            state["run_id"], path)


_FIELDS = frozenset({
    "trial_id", "config", "status", "trainable_name", "experiment_tag", "evaluated_params",
    "resources", "bundles", "placement_strategy", "last_result", "checkpoint", "checkpoints",
    "error", "error_file", "num_failures", "local_path", "relative_logdir",
    "custom_trial_name"})


def reset_unfinished(trials: list[Trial], *, resume_unfinished: bool, resume_errored: bool,
                     restart_errored: bool) -> list[Trial]:
    """Unfinished trials become PENDING (from their checkpoint); errored ones per the flags."""
    for trial in trials:
        if trial.status == Trial.ERROR and (restart_errored or resume_errored):
            if restart_errored:
                trial.checkpoint, trial.checkpoints = None, []
                trial.results, trial.last_result = [], {}
            trial.status, trial.error, trial.num_failures = Trial.PENDING, None, 0
        elif trial.status in (Trial.RUNNING, Trial.PAUSED, Trial.PENDING):
            trial.status = Trial.PENDING if resume_unfinished else Trial.TERMINATED
        if trial.local_path:
            os.makedirs(trial.local_path, exist_ok=True)
    return trials

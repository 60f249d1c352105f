"""``nbdist.tune``: Ray Tune's API on nbdist (``from nbdist import tune``).

Trials are nbdist actors placed with their resources; reports stream to the driver in batches
without blocking the trainable, and every report and change of status is published on nbdist's
event stream (``RunUpdate``), from which the notebook draws its live Trials view. Built only on
nbdist's public API, so it runs unchanged on ``nbdist.init(backend="ray")``.

    tuner.py            Tuner, Tuner.restore, the one path every entry point takes
    config.py           TuneConfig, RunConfig, CheckpointConfig, FailureConfig
    legacy.py           tune.run, run_experiments, Experiment, ExperimentAnalysis
    execution/          the controller loop, trial actors, storage, event records
    experiment/         Trial
    trainable/          report / get_checkpoint / get_context, Trainable, with_parameters,
                        with_resources
    result_grid.py      ResultGrid, Result; restore.py: reading a search back for Tuner.restore
    checkpoint.py       Checkpoint (re-exported by nbdist.train); error.py: TuneError, TrialError
    stopper.py          Stopper classes; callback.py, logger.py: hooks; progress.py: text status
    schedulers/, search/   the decision algorithms and search spaces
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nbdist.tune import schedulers, search
    from nbdist.tune.callback import (
        Callback,
    )
    from nbdist.tune.checkpoint import (
        Checkpoint,
    )
    from nbdist.tune.config import (
        CheckpointConfig,
        FailureConfig,
        RunConfig,
        TuneConfig,
    )
    from nbdist.tune.error import (
        TrialError,
        TuneError,
    )
    from nbdist.tune.experiment.trial import (
        Trial,
    )
    from nbdist.tune.legacy import (
        Experiment,
        ExperimentAnalysis,
        run,
        run_experiments,
    )
    from nbdist.tune.progress_reporter import (
        CLIReporter,
        JupyterNotebookReporter,
        ProgressReporter,
    )
    from nbdist.tune.result_grid import (
        Result,
        ResultGrid,
    )
    from nbdist.tune.search.sample import (
        choice,
        grid_search,
        lograndint,
        loguniform,
        qlograndint,
        qloguniform,
        qrandint,
        qrandn,
        quniform,
        randint,
        randn,
        sample_from,
        uniform,
    )
    from nbdist.tune.stopper import (
        Stopper,
    )
    from nbdist.tune.trainable import (
        PlacementGroupFactory,
        Trainable,
        TuneContext,
        get_checkpoint,
        get_context,
        report,
        with_parameters,
        with_resources,
    )
    from nbdist.tune.tuner import (
        Tuner,
        register_trainable,
    )

# Imported on first use: a trial's actor imports this package to run its trainable and
# should not pay for the driver's side (pandas, the schedulers, the search algorithms).
_WHERE = {
    "CLIReporter": "nbdist.tune.progress_reporter",
    "JupyterNotebookReporter": "nbdist.tune.progress_reporter",
    "ProgressReporter": "nbdist.tune.progress_reporter",
    "Callback": "nbdist.tune.callback",
    "Checkpoint": "nbdist.tune.checkpoint",
    "CheckpointConfig": "nbdist.tune.config",
    "Experiment": "nbdist.tune.legacy",
    "ExperimentAnalysis": "nbdist.tune.legacy",
    "FailureConfig": "nbdist.tune.config",
    "PlacementGroupFactory": "nbdist.tune.trainable",
    "Result": "nbdist.tune.result_grid",
    "ResultGrid": "nbdist.tune.result_grid",
    "RunConfig": "nbdist.tune.config",
    "Stopper": "nbdist.tune.stopper",
    "Trainable": "nbdist.tune.trainable",
    "Trial": "nbdist.tune.experiment.trial",
    "TrialError": "nbdist.tune.error",
    "TuneConfig": "nbdist.tune.config",
    "TuneContext": "nbdist.tune.trainable",
    "TuneError": "nbdist.tune.error",
    "Tuner": "nbdist.tune.tuner",
    "choice": "nbdist.tune.search.sample",
    "get_checkpoint": "nbdist.tune.trainable",
    "get_context": "nbdist.tune.trainable",
    "grid_search": "nbdist.tune.search.sample",
    "lograndint": "nbdist.tune.search.sample",
    "loguniform": "nbdist.tune.search.sample",
    "qlograndint": "nbdist.tune.search.sample",
    "qloguniform": "nbdist.tune.search.sample",
    "qrandint": "nbdist.tune.search.sample",
    "qrandn": "nbdist.tune.search.sample",
    "quniform": "nbdist.tune.search.sample",
    "randint": "nbdist.tune.search.sample",
    "randn": "nbdist.tune.search.sample",
    "register_env": "nbdist.tune.registry",
    "register_trainable": "nbdist.tune.tuner",
    "registry": "nbdist.tune.registry",
    "report": "nbdist.tune.trainable",
    "run": "nbdist.tune.legacy",
    "run_experiments": "nbdist.tune.legacy",
    "sample_from": "nbdist.tune.search.sample",
    "schedulers": "nbdist.tune.schedulers",
    "search": "nbdist.tune.search",
    "logger": "nbdist.tune.logger",
    "stopper": "nbdist.tune.stopper",
    "uniform": "nbdist.tune.search.sample",
    "with_parameters": "nbdist.tune.trainable",
    "with_resources": "nbdist.tune.trainable",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'nbdist.tune' has no attribute {name!r}")
    if module == f"nbdist.tune.{name}":  # a submodule: tune.schedulers, tune.stopper, ...
        value = importlib.import_module(module)
    else:
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


__all__ = [
    "CLIReporter",
    "Callback",
    "Checkpoint",
    "CheckpointConfig",
    "Experiment",
    "ExperimentAnalysis",
    "FailureConfig",
    "JupyterNotebookReporter",
    "PlacementGroupFactory",
    "ProgressReporter",
    "Result",
    "ResultGrid",
    "RunConfig",
    "Stopper",
    "Trainable",
    "Trial",
    "TrialError",
    "TuneConfig",
    "TuneContext",
    "TuneError",
    "Tuner",
    "choice",
    "get_checkpoint",
    "get_context",
    "grid_search",
    "lograndint",
    "loguniform",
    "qlograndint",
    "qloguniform",
    "qrandint",
    "qrandn",
    "quniform",
    "randint",
    "randn",
    "register_env",
    "register_trainable",
    "report",
    "run",
    "run_experiments",
    "sample_from",
    "schedulers",
    "search",
    "uniform",
    "with_parameters",
    "with_resources",
]

"""``Tuner``: Ray Tune's entry point (``Tuner(trainable, param_space=..., tune_config=...,
run_config=...).fit()`` → ``ResultGrid``), and ``Tuner.restore`` to resume a search from its
storage directory.

``run_search`` is the one path every entry point takes (``Tuner.fit``, ``tune.run``,
``run_experiments``): resolve the trainable, check it pickles, set up storage, the trial source,
the scheduler, stoppers and callbacks, then hand over to the controller.
"""

from __future__ import annotations

import datetime
import io
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import nbdist
from nbdist.tune.callback import Callback, CallbackList
from nbdist.tune.config import (
    DEFAULT_STORAGE,
    CheckpointConfig,
    FailureConfig,
    RunConfig,
    TuneConfig,
)
from nbdist.tune.error import TuneError
from nbdist.tune.execution import storage as _storage
from nbdist.tune.execution.controller import Settings, TuneController
from nbdist.tune.experiment.trial import Trial
from nbdist.tune.progress import ProgressCallback
from nbdist.tune.result_grid import ResultGrid, result_of
from nbdist.tune.stopper import make_stopper
from nbdist.tune.trainable.trainable import Trainable

_registry: dict[str, Any] = {}


def register_trainable(name: str, trainable: Any) -> None:
    """Give ``trainable`` (a function or a ``Trainable`` class) a name ``run`` can refer to."""
    if not (callable(trainable)):
        raise TypeError(f"register_trainable takes a function or a Trainable class, not "
                        f"{type(trainable).__name__}")
    _registry[name] = trainable


def resolve_trainable(trainable: Any) -> tuple[Any, str]:
    if isinstance(trainable, str):
        if trainable not in _registry:  # RLlib's algorithms go by name too ("PPO", "DQN")
            from nbdist.rllib.algorithms.registry import get_algorithm_class

            algorithm = get_algorithm_class(trainable)
            if algorithm is not None:
                return algorithm, trainable
        if trainable not in _registry:
            raise TuneError(f"no trainable is registered as {trainable!r}; registered: "
                            f"{sorted(_registry)} (use tune.register_trainable)")
        return _registry[trainable], trainable
    if not callable(trainable):
        raise TuneError(f"a trainable must be a function, a Trainable class or a registered "
                        f"name, not {type(trainable).__name__}")
    return trainable, getattr(trainable, "__name__", type(trainable).__name__)


def check_pickles(trainable: Any, name: str) -> None:
    """Fail now, naming the culprit, rather than in every trial."""
    import cloudpickle

    try:
        cloudpickle.dumps(trainable)
        return
    except Exception as exc:
        error = exc
    ok, failures = nbdist.util.inspect_serializability(trainable, name=name,
                                                       print_file=io.StringIO())
    culprits = ", ".join(sorted(repr(f) for f in failures)) or f"{error}"
    raise TypeError(f"the trainable {name!r} cannot be pickled to send it to its trials: "
                    f"{culprits} ({type(error).__name__}: {error}). Create such objects inside "
                    "the trainable, or pass them with tune.with_parameters.") from error


def in_kernel() -> bool:
    """Whether this driver is an IPython kernel (where the live view replaces text)."""
    if "ipykernel" not in sys.modules:
        return False
    app = sys.modules.get("ipykernel.kernelapp")
    try:
        return bool(app is not None and app.IPKernelApp.initialized())
    except Exception:
        return False


@dataclass
class Search:
    """Everything one run of the controller needs, resolved from the user's arguments."""
    trainable: Any
    trainable_name: str
    param_space: dict[str, Any]
    tune_config: TuneConfig
    run_config: RunConfig
    resources: Any = None
    trials: list[Trial] = field(default_factory=list)
    source_state: Any = None
    counter: int = 0
    run_id: str | None = None
    path: str | None = None  # an existing experiment directory, when resuming


def run_search(search: Search) -> tuple[list[Trial], TuneController]:
    from nbdist.tune.schedulers import FIFOScheduler
    from nbdist.tune.search import make_trial_source

    if not nbdist.is_initialized():
        nbdist.init()
    tc, rc = search.tune_config, search.run_config
    check_pickles(search.trainable, search.trainable_name)
    if search.path is not None:
        store = _storage.ExperimentStorage(os.path.dirname(search.path),
                                           os.path.basename(search.path))
    else:
        name = rc.name or (f"{search.trainable_name}_"
                           f"{datetime.datetime.now():%Y-%m-%d_%H-%M-%S}")
        store = _storage.ExperimentStorage(rc.storage_path or DEFAULT_STORAGE, name)
        store.save_tuner({"param_space": search.param_space, "tune_config": tc,
                          "run_config": rc, "trainable_name": search.trainable_name,
                          "resources": search.resources})
    scheduler = tc.scheduler if tc.scheduler is not None else FIFOScheduler()
    if not scheduler.set_search_properties(tc.metric, tc.mode):
        raise TuneError(f"{type(scheduler).__name__} has its own metric/mode, different from "
                        "TuneConfig's; set them in one place")
    source = make_trial_source(tc.search_alg, search.param_space, tc.num_samples, tc.metric,
                               tc.mode, tc.max_concurrent_trials)
    if search.source_state is not None:
        source.set_state(search.source_state)
    callbacks = list(rc.callbacks or [])
    verbose = 1 if rc.verbose is None else int(rc.verbose)
    if rc.progress_reporter is not None:  # the user's table replaces the one-line status
        from nbdist.tune.progress_reporter import ReporterCallback

        callbacks.append(ReporterCallback(rc.progress_reporter, tc.metric, tc.mode))
    elif verbose >= 1 and not in_kernel():
        callbacks.append(ProgressCallback(verbose, tc.metric))
    for cb in callbacks:
        if not isinstance(cb, Callback):
            raise TuneError(f"callbacks must be tune.Callback instances, got {cb!r}")
    callback_list = CallbackList(callbacks)
    callback_list.setup(stop=rc.stop, num_samples=tc.num_samples,
                        total_num_samples=source.total())
    controller = TuneController(
        trainable=search.trainable, trainable_name=search.trainable_name, source=source,
        scheduler=scheduler, stopper=make_stopper(rc.stop), callbacks=callback_list,
        storage=store, settings=_settings(search), trials=search.trials)
    if search.run_id:
        controller.run_id = search.run_id
        controller.counter = search.counter
    try:
        controller.run()
    finally:
        # Views of the run (the notebook's) get its last records while the cell that called
        # fit() still runs, so they show in that cell, however short the search was.
        nbdist.events.bus().flush()
    return controller.trials, controller


def _settings(search: Search) -> Settings:
    tc, rc = search.tune_config, search.run_config
    reuse = tc.reuse_actors
    if reuse is None:
        trainable = search.trainable
        is_class = isinstance(trainable, type) and issubclass(trainable, Trainable)
        reuse = not is_class or trainable.reset_config is not Trainable.reset_config
    checkpoint_config = rc.checkpoint_config or CheckpointConfig()
    return Settings(reuse_actors=bool(reuse), max_concurrent_trials=tc.max_concurrent_trials,
                    time_budget_s=tc.time_budget_s, checkpoint_config=checkpoint_config,
                    failure_config=rc.failure_config or FailureConfig(),
                    trial_name_creator=tc.trial_name_creator,
                    trial_dirname_creator=tc.trial_dirname_creator, resources=search.resources)


def grid_of(trials: list[Trial], controller: TuneController | None, tc: TuneConfig,
            path: str) -> ResultGrid:
    return ResultGrid([result_of(t) for t in trials], metric=tc.metric, mode=tc.mode,
                      experiment_path=path, trials=trials)


class Tuner:
    """Run a hyperparameter search: ``Tuner(trainable, param_space=..., tune_config=...,
    run_config=...).fit()``."""

    def __init__(self, trainable: Any = None, *, param_space: dict[str, Any] | None = None,
                 tune_config: TuneConfig | None = None, run_config: RunConfig | None = None,
                 _search: Search | None = None) -> None:
        if _search is None:
            fn, name = resolve_trainable(trainable)
            _search = Search(fn, name, dict(param_space or {}), tune_config or TuneConfig(),
                             run_config or RunConfig())
        self._search = _search
        self._grid: ResultGrid | None = None

    def fit(self) -> ResultGrid:
        """Run the search to its end (or to an interrupt: then the partial results)."""
        trials, controller = run_search(self._search)
        self._grid = grid_of(trials, controller, self._search.tune_config,
                             controller.storage.path)
        self._search = _resumable(self._search, controller)
        return self._grid

    def get_results(self) -> ResultGrid:
        if self._grid is None:
            if self._search.path is None:
                raise RuntimeError("get_results() needs a finished or restored search: call "
                                   "fit() first")
            self._grid = grid_of(self._search.trials, None, self._search.tune_config,
                                 self._search.path)
        return self._grid

    @classmethod
    def can_restore(cls, path: str) -> bool:
        path = os.path.expanduser(path)
        return os.path.exists(os.path.join(path, _storage.STATE_FILE)) and os.path.exists(
            os.path.join(path, _storage.TUNER_FILE))

    @classmethod
    def restore(cls, path: str, trainable: Any, *, resume_unfinished: bool = True,
                resume_errored: bool = False, restart_errored: bool = False,
                param_space: dict[str, Any] | None = None) -> Tuner:
        """A Tuner that continues the search stored at ``path`` (``storage_path/name``):
        finished trials are kept, unfinished ones resume from their last checkpoint."""
        from nbdist.tune.restore import restored_search

        fn, name = resolve_trainable(trainable)
        search = Search(*restored_search(
            os.path.abspath(os.path.expanduser(path)), fn, name,
            resume_unfinished=resume_unfinished, resume_errored=resume_errored,
            restart_errored=restart_errored, param_space=param_space))
        return cls(_search=search)


def _resumable(search: Search, controller: TuneController) -> Search:
    """The search as it now stands, so a second ``fit()`` continues it."""
    from nbdist.tune.restore import reset_unfinished

    trials = reset_unfinished(controller.trials, resume_unfinished=True, resume_errored=False,
                              restart_errored=False)
    return Search(search.trainable, search.trainable_name, search.param_space,
                  search.tune_config, search.run_config, search.resources, trials,
                  controller.source.get_state(), controller.counter, controller.run_id,
                  controller.storage.path)

"""Ray Tune's older API: ``tune.run``, ``run_experiments``, ``Experiment`` and the analysis
object ``tune.run`` returns, on the same runner as ``Tuner``.

The seed's program runs unchanged::

    tune.register_trainable('my_func', my_func)          # my_func(config, reporter)
    tune.run_experiments({'my_experiment': {'run': 'my_func', 'resources': {'cpu': 1, 'gpu': 0},
                          'stop': {'mean_accuracy': 100}, 'config': {...}}})
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nbdist.tune.config import CheckpointConfig, FailureConfig, RunConfig, TuneConfig
from nbdist.tune.error import TuneError
from nbdist.tune.experiment.trial import Trial
from nbdist.tune.result_grid import result_of
from nbdist.tune.tuner import Search, resolve_trainable, run_search

if TYPE_CHECKING:
    import pandas as pd


class Experiment:
    """One named search for ``run_experiments``: ``Experiment(name, run, stop=..., config=...,
    resources_per_trial=..., num_samples=...)``."""

    def __init__(self, name: str, run: Any, stop: Any = None, config: dict | None = None,
                 resources_per_trial: Any = None, num_samples: int = 1,
                 storage_path: str | None = None, local_dir: str | None = None,
                 checkpoint_config: CheckpointConfig | None = None, max_failures: int = 0,
                 trial_name_creator: Any = None, trial_dirname_creator: Any = None,
                 **_: Any) -> None:
        self.name = name
        self.spec = {"run": run, "stop": stop, "config": config or {},
                     "resources": resources_per_trial, "num_samples": num_samples,
                     "storage_path": storage_path or local_dir,
                     "checkpoint_config": checkpoint_config, "max_failures": max_failures,
                     "trial_name_creator": trial_name_creator,
                     "trial_dirname_creator": trial_dirname_creator}

    @classmethod
    def from_json(cls, name: str, spec: Mapping[str, Any]) -> Experiment:
        if "run" not in spec:
            raise TuneError(f"experiment {name!r} has no 'run' (the trainable or its "
                            "registered name)")
        known = {"run", "stop", "config", "resources", "resources_per_trial", "num_samples",
                 "repeat", "storage_path", "local_dir", "checkpoint_freq", "checkpoint_at_end",
                 "keep_checkpoints_num", "max_failures", "trial_name_creator",
                 "trial_dirname_creator"}
        unknown = set(spec) - known
        if unknown:
            raise TuneError(f"experiment {name!r}: unknown keys {sorted(unknown)}; known: "
                            f"{sorted(known)}")
        checkpoint = CheckpointConfig(
            num_to_keep=spec.get("keep_checkpoints_num"),
            checkpoint_frequency=spec.get("checkpoint_freq", 0),
            checkpoint_at_end=spec.get("checkpoint_at_end"))
        return cls(name, spec["run"], stop=spec.get("stop"), config=spec.get("config"),
                   resources_per_trial=spec.get("resources", spec.get("resources_per_trial")),
                   num_samples=spec.get("num_samples", spec.get("repeat", 1)),
                   storage_path=spec.get("storage_path", spec.get("local_dir")),
                   checkpoint_config=checkpoint, max_failures=spec.get("max_failures", 0),
                   trial_name_creator=spec.get("trial_name_creator"),
                   trial_dirname_creator=spec.get("trial_dirname_creator"))


class ExperimentAnalysis:
    """What ``tune.run`` returns: the trials, and the best of them by ``metric``/``mode``."""

    def __init__(self, trials: list[Trial], experiment_path: str, metric: str | None = None,
                 mode: str | None = None) -> None:
        self.trials = trials
        self.experiment_path = experiment_path
        self.default_metric = metric
        self.default_mode = mode

    def _metric_mode(self, metric: str | None, mode: str | None) -> tuple[str, str]:
        metric, mode = metric or self.default_metric, mode or self.default_mode
        if not metric or not mode:
            raise ValueError("pass metric and mode here or to tune.run(metric=..., mode=...)")
        return metric, mode

    def get_best_trial(self, metric: str | None = None, mode: str | None = None,
                       scope: str = "last") -> Trial | None:
        metric, mode = self._metric_mode(metric, mode)
        scored = []
        for trial in self.trials:
            values = [r[metric] for r in trial.results if metric in r]
            if not values:
                continue
            value = values[-1] if scope == "last" else (max(values) if mode == "max"
                                                        else min(values))
            scored.append((value, trial))
        if not scored:
            return None
        return (max if mode == "max" else min)(scored, key=lambda vt: vt[0])[1]

    def get_best_config(self, metric: str | None = None, mode: str | None = None,
                        scope: str = "last") -> dict[str, Any] | None:
        trial = self.get_best_trial(metric, mode, scope)
        return trial.config if trial else None

    def get_best_checkpoint(self, trial: Trial, metric: str | None = None,
                            mode: str | None = None) -> Any:
        metric, mode = self._metric_mode(metric, mode)
        scored = [(float(r[metric]), c) for c, r in trial.checkpoints
                  if r.get(metric) is not None]
        if not scored:
            return trial.checkpoint
        return (max if mode == "max" else min)(scored, key=lambda vc: vc[0])[1]

    @property
    def best_trial(self) -> Trial | None:
        return self.get_best_trial()

    @property
    def best_config(self) -> dict[str, Any] | None:
        return self.get_best_config()

    @property
    def best_result(self) -> dict[str, Any] | None:
        trial = self.best_trial
        return trial.last_result if trial else None

    @property
    def best_checkpoint(self) -> Any:
        trial = self.best_trial
        return self.get_best_checkpoint(trial) if trial else None

    @property
    def results(self) -> dict[str, dict[str, Any]]:
        return {t.trial_id: t.last_result for t in self.trials}

    @property
    def results_df(self) -> pd.DataFrame:
        import pandas as pd

        rows = [{k: v for k, v in t.last_result.items() if k != "config"}
                | {f"config/{k}": v for k, v in t.evaluated_params.items()}
                for t in self.trials]
        frame = pd.DataFrame(rows)
        return frame.set_index("trial_id") if "trial_id" in frame else frame

    def dataframe(self, metric: str | None = None, mode: str | None = None) -> pd.DataFrame:
        return result_grid_frame(self.trials)

    @property
    def trial_dataframes(self) -> dict[str, pd.DataFrame]:
        import pandas as pd

        return {t.local_path: pd.DataFrame([{k: v for k, v in r.items() if k != "config"}
                                            for r in t.results]) for t in self.trials}

    def get_all_configs(self) -> dict[str, dict[str, Any]]:
        return {t.local_path: t.config for t in self.trials}

    @property
    def errors(self) -> list[str]:
        return [t.error for t in self.trials if t.error]


def result_grid_frame(trials: list[Trial]) -> pd.DataFrame:
    from nbdist.tune.result_grid import ResultGrid

    return ResultGrid([result_of(t) for t in trials]).get_dataframe()


def run(run_or_experiment: Any, *, name: str | None = None, metric: str | None = None,
        mode: str | None = None, stop: Any = None, time_budget_s: float | None = None,
        config: dict[str, Any] | None = None, resources_per_trial: Any = None,
        num_samples: int = 1, storage_path: str | None = None, local_dir: str | None = None,
        search_alg: Any = None, scheduler: Any = None,
        checkpoint_config: CheckpointConfig | None = None, checkpoint_freq: int = 0,
        checkpoint_at_end: bool = False, keep_checkpoints_num: int | None = None,
        verbose: int = 1, callbacks: list[Any] | None = None, max_failures: int = 0,
        fail_fast: bool | str = False, reuse_actors: bool | None = None,
        trial_name_creator: Any = None, trial_dirname_creator: Any = None,
        max_concurrent_trials: int | None = None, raise_on_failed_trial: bool = True,
        progress_reporter: Any = None, **ignored: Any) -> ExperimentAnalysis:
    """Ray Tune's ``tune.run``: run a search and return an ``ExperimentAnalysis``."""
    if isinstance(run_or_experiment, Experiment):
        spec = run_or_experiment.spec
        name = name or run_or_experiment.name
        run_or_experiment = spec["run"]
        stop = stop if stop is not None else spec["stop"]
        config = config or spec["config"]
        resources_per_trial = resources_per_trial or spec["resources"]
        num_samples = spec["num_samples"]
        storage_path = storage_path or spec["storage_path"]
        checkpoint_config = checkpoint_config or spec["checkpoint_config"]
        max_failures = max_failures or spec["max_failures"]
        trial_name_creator = trial_name_creator or spec["trial_name_creator"]
        trial_dirname_creator = trial_dirname_creator or spec["trial_dirname_creator"]
    trainable, trainable_name = resolve_trainable(run_or_experiment)
    checkpoint_config = checkpoint_config or CheckpointConfig(
        num_to_keep=keep_checkpoints_num, checkpoint_frequency=checkpoint_freq,
        checkpoint_at_end=checkpoint_at_end)
    tune_config = TuneConfig(
        metric=metric, mode=mode, search_alg=search_alg, scheduler=scheduler,
        num_samples=num_samples, max_concurrent_trials=max_concurrent_trials,
        time_budget_s=time_budget_s, reuse_actors=reuse_actors,
        trial_name_creator=trial_name_creator, trial_dirname_creator=trial_dirname_creator)
    run_config = RunConfig(
        name=name, storage_path=storage_path or local_dir, stop=stop, verbose=verbose,
        callbacks=callbacks, checkpoint_config=checkpoint_config,
        failure_config=FailureConfig(max_failures=max_failures, fail_fast=fail_fast),
        progress_reporter=progress_reporter)
    trials, controller = run_search(Search(trainable, trainable_name, dict(config or {}),
                                           tune_config, run_config, resources_per_trial))
    failed = [t for t in trials if t.status == Trial.ERROR]
    if failed and raise_on_failed_trial and not controller.interrupted:
        raise TuneError(f"trials did not complete: {[t.trial_id for t in failed]}; their "
                        f"tracebacks are in {[t.error_file for t in failed]}")
    return ExperimentAnalysis(trials, controller.storage.path, metric, mode)


def run_experiments(experiments: Mapping[str, Any] | Experiment | list[Experiment], *,
                    scheduler: Any = None, verbose: int = 1, raise_on_failed_trial: bool = True,
                    reuse_actors: bool | None = None, callbacks: list[Any] | None = None,
                    **ignored: Any) -> list[Trial]:
    """Ray Tune's first entry point: run each named experiment; returns all their trials."""
    if isinstance(experiments, Experiment):
        runs = [experiments]
    elif isinstance(experiments, Mapping):
        runs = [e if isinstance(e, Experiment) else Experiment.from_json(n, e)
                for n, e in experiments.items()]
    else:
        runs = list(experiments)
    trials: list[Trial] = []
    for experiment in runs:
        analysis = run(experiment, scheduler=scheduler, verbose=verbose,
                       raise_on_failed_trial=raise_on_failed_trial, reuse_actors=reuse_actors,
                       callbacks=callbacks)
        trials.extend(analysis.trials)
    return trials

"""Tuner.fit with real trials: results, storage, events, errors, stopping, checkpoints."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from polling import poll

import nbdist
from nbdist import tune

pytestmark = [pytest.mark.usefixtures("cluster"), pytest.mark.timeout(120)]


def quadratic(config: dict[str, Any]) -> None:
    for step in range(4):
        tune.report({"score": config["x"] * step, "step": step})


def test_grid_search_results_storage_and_best(storage: str) -> None:
    grid = tune.Tuner(
        quadratic, param_space={"x": tune.grid_search([1, 2, 3]), "fixed": "a"},
        tune_config=tune.TuneConfig(metric="score", mode="max"),
        run_config=tune.RunConfig(name="grid", storage_path=storage, verbose=0)).fit()
    assert len(grid) == 3 and grid.errors == []
    best = grid.get_best_result()
    assert best.config == {"x": 3, "fixed": "a"}
    assert best.metrics["score"] == 9 and best.metrics["training_iteration"] == 4
    assert list(best.metrics_dataframe["score"]) == [0, 3, 6, 9]
    assert grid.get_best_result("score", "min").config["x"] == 1
    frame = grid.get_dataframe()
    assert sorted(frame["config/x"]) == [1, 2, 3] and set(frame["training_iteration"]) == {4}
    trial_dir = Path(best.path)
    assert trial_dir.parent == Path(storage) / "grid"
    assert json.loads((trial_dir / "params.json").read_text()) == {"x": 3, "fixed": "a"}
    lines = [json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines()]
    assert [r["score"] for r in lines] == [0, 3, 6, 9]


def test_every_report_and_status_change_is_published(storage: str) -> None:
    seen: list[Any] = []
    lock = threading.Lock()

    def collect(batch: list[Any]) -> None:
        with lock:
            seen.extend(batch)

    unsubscribe = nbdist.events.subscribe(collect, kinds=["run_update"])
    try:
        grid = tune.Tuner(quadratic, param_space={"x": tune.grid_search([1, 2])},
                          run_config=tune.RunConfig(name="events", storage_path=storage,
                                                    verbose=0)).fit()
        ids = {r.metrics["trial_id"] for r in grid}
        poll(lambda: {e.member for e in seen if e.status == "TERMINATED"} == ids,
             timeout=10, what="a TERMINATED record per trial")
    finally:
        unsubscribe()
    with lock:
        rows = [e for e in seen if e.member in ids]
    assert {e.library for e in rows} == {"tune"} and len({e.run for e in rows}) == 1
    for trial_id in ids:
        mine = [e for e in rows if e.member == trial_id]
        assert [e.status for e in mine][:2] == ["PENDING", "RUNNING"]
        reports = [e for e in mine if e.status == "RUNNING" and e.iteration > 0]
        assert [e.iteration for e in reports] == [1, 2, 3, 4]
        last = dict(reports[-1].metrics)
        assert last["score"] == 3 * int(dict(mine[-1].config)["x"]) and last["step"] == 3
        assert mine[-1].status == "TERMINATED"


def fails_for_two(config: dict[str, Any]) -> None:
    tune.report({"score": 1})
    if config["x"] == 2:
        raise ValueError("x=2 is not allowed")
    tune.report({"score": 2})


def test_a_trial_that_raises_is_recorded_and_the_search_goes_on(storage: str) -> None:
    grid = tune.Tuner(fails_for_two, param_space={"x": tune.grid_search([1, 2, 3])},
                      run_config=tune.RunConfig(storage_path=storage, verbose=0)).fit()
    by_x = {r.config["x"]: r for r in grid}
    assert by_x[1].error is None and by_x[3].error is None
    assert by_x[1].metrics["score"] == 2 and by_x[3].metrics["score"] == 2
    error = by_x[2].error
    assert isinstance(error, tune.TrialError) and isinstance(error.cause, ValueError)
    assert "x=2 is not allowed" in str(error) and "fails_for_two" in error.traceback
    assert grid.errors == [error] and by_x[2].metrics["score"] == 1
    assert "x=2 is not allowed" in (Path(by_x[2].path) / "error.txt").read_text()


def forever(config: dict[str, Any]) -> None:
    i = 0
    while True:
        i += 1
        tune.report({"value": i * config["rate"]})


def test_dict_stop_criteria_stop_each_trial_where_met(storage: str) -> None:
    grid = tune.Tuner(forever, param_space={"rate": tune.grid_search([1, 5])},
                      run_config=tune.RunConfig(stop={"value": 20}, storage_path=storage,
                                                verbose=0)).fit()
    by_rate = {r.config["rate"]: r.metrics for r in grid}
    assert by_rate[1]["training_iteration"] == 20 and by_rate[1]["value"] == 20
    assert by_rate[5]["training_iteration"] == 4 and by_rate[5]["value"] == 20
    assert all(len(r.metrics_dataframe) == r.metrics["training_iteration"] for r in grid)


def test_a_met_stop_criterion_is_not_the_schedulers_or_searchers_decision(storage: str
                                                                           ) -> None:
    from nbdist.tune.schedulers import FIFOScheduler
    from nbdist.tune.search import BasicVariantGenerator

    seen: dict[str, list[int]] = {"scheduler": [], "searcher": [], "completed": []}

    class Scheduler(FIFOScheduler):
        def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> str:
            seen["scheduler"].append(result["training_iteration"])
            return super().on_trial_result(controller, trial, result)

        def on_trial_complete(self, controller: Any, trial: Any, result: dict[str, Any]
                              ) -> None:
            seen["completed"].append(result["training_iteration"])

    class Searcher(BasicVariantGenerator):
        def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
            seen["searcher"].append(result["training_iteration"])

    tune.Tuner(forever, param_space={"rate": 1},
               tune_config=tune.TuneConfig(scheduler=Scheduler(), search_alg=Searcher()),
               run_config=tune.RunConfig(stop={"training_iteration": 3}, storage_path=storage,
                                         verbose=0)).fit()
    # As in Ray, the controller stops the trial at iteration 3 without asking either of them
    assert seen == {"scheduler": [1, 2], "searcher": [1, 2], "completed": [3]}


def test_stopper_function_and_time_budget_end_endless_trials(storage: str) -> None:
    grid = tune.Tuner(forever, param_space={"rate": 1},
                      run_config=tune.RunConfig(
                          stop=lambda trial_id, result: result["training_iteration"] >= 7,
                          storage_path=storage, verbose=0)).fit()
    assert grid[0].metrics["training_iteration"] == 7
    grid = tune.Tuner(forever, param_space={"rate": tune.grid_search([1, 2])},
                      tune_config=tune.TuneConfig(time_budget_s=0.5),
                      run_config=tune.RunConfig(storage_path=storage, verbose=0)).fit()
    assert len(grid) == 2 and all(r.status == "TERMINATED" for r in grid)


def test_scheduler_stops_trials_early(storage: str) -> None:
    from nbdist.tune.schedulers import ASHAScheduler

    def curve(config: dict[str, Any]) -> None:
        for step in range(1, 33):
            tune.report({"acc": config["q"] * (1 - 1 / (step + 1))})

    grid = tune.Tuner(
        curve, param_space={"q": tune.grid_search([1.0, 0.8, 0.5, 0.3, 0.2, 0.1])},
        tune_config=tune.TuneConfig(metric="acc", mode="max", scheduler=ASHAScheduler(
            max_t=32, grace_period=2, reduction_factor=2)),
        run_config=tune.RunConfig(storage_path=storage, verbose=0)).fit()
    iterations = {r.config["q"]: r.metrics["training_iteration"] for r in grid}
    assert iterations[1.0] == 32
    assert min(iterations.values()) < 32  # weaker trials were cut at a rung
    for result in grid:
        assert len(result.metrics_dataframe) == result.metrics["training_iteration"]


class _Unpicklable:
    lock = threading.Lock()


def test_unpicklable_trainable_fails_at_fit_naming_the_culprit(storage: str) -> None:
    held_lock = threading.Lock()

    def uses_lock(config: dict[str, Any]) -> None:
        with held_lock:
            tune.report({"x": 1})

    with pytest.raises(TypeError, match="held_lock"):
        tune.Tuner(uses_lock, run_config=tune.RunConfig(storage_path=storage,
                                                         verbose=0)).fit()


def checkpointing(config: dict[str, Any]) -> None:
    import tempfile

    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            start = int(Path(d, "step").read_text())
    for step in range(start + 1, 6):
        with tempfile.TemporaryDirectory() as d:
            Path(d, "step").write_text(str(step))
            tune.report({"step": step, "score": -abs(step - 3) + step / 100},
                        checkpoint=tune.Checkpoint.from_directory(d))


def test_checkpoints_are_persisted_and_pruned(storage: str) -> None:
    grid = tune.Tuner(checkpointing, run_config=tune.RunConfig(
        storage_path=storage, verbose=0, checkpoint_config=tune.CheckpointConfig(
            num_to_keep=2, checkpoint_score_attribute="score"))).fit()
    result = grid[0]
    assert result.checkpoint is not None
    with result.checkpoint.as_directory() as d:
        assert Path(d, "step").read_text() == "5"
    kept = sorted(p.name for p in Path(result.path).iterdir() if p.name.startswith("checkpoint_"))
    # the two best by score (steps 3 and 4) and, as always, the latest (step 5)
    assert kept == ["checkpoint_000002", "checkpoint_000003", "checkpoint_000004"]
    assert [c.path for c, _ in result.best_checkpoints] == [
        os.path.join(result.path, name) for name in kept]


def dies_once(config: dict[str, Any]) -> None:
    import tempfile

    marker = Path(config["marker"])
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        start = int(Path(checkpoint.path, "step").read_text())
    for step in range(start + 1, 7):
        with tempfile.TemporaryDirectory() as d:
            Path(d, "step").write_text(str(step))
            tune.report({"step": step, "pid": os.getpid()},
                        checkpoint=tune.Checkpoint.from_directory(d))
        if step == 3 and not marker.exists():
            marker.write_text("died")
            os.kill(os.getpid(), 9)


def test_killed_worker_is_retried_from_its_last_checkpoint(storage: str, tmp_path: Path) -> None:
    grid = tune.Tuner(dies_once, param_space={"marker": str(tmp_path / "marker")},
                      run_config=tune.RunConfig(
                          storage_path=storage, verbose=0,
                          failure_config=tune.FailureConfig(max_failures=1))).fit()
    result = grid[0]
    assert result.error is None, result.error
    assert list(result.metrics_dataframe["step"]) == [1, 2, 3, 4, 5, 6]
    assert list(result.metrics_dataframe["training_iteration"]) == [1, 2, 3, 4, 5, 6]
    # The rest ran in a new process (from step 3's checkpoint, or from step 2's when the
    # report of step 3 died with the process before the driver took it).
    pids = list(result.metrics_dataframe["pid"])
    assert len(set(pids)) == 2 and pids[0] != pids[-1]


def test_killed_worker_without_retries_is_an_error(storage: str, tmp_path: Path) -> None:
    grid = tune.Tuner(dies_once, param_space={"marker": str(tmp_path / "marker")},
                      run_config=tune.RunConfig(storage_path=storage, verbose=0)).fit()
    assert grid[0].error is not None and "died" in str(grid[0].error)
    # The last report the driver took: step 3's, or step 2's when step 3's report died with
    # the process before the driver's poll took it (reports are buffered in the trial).
    assert grid[0].metrics["step"] in (2, 3)


class Interrupt(tune.Callback):
    """Raises KeyboardInterrupt in the driver, as Ctrl+C would, at a trial's third report."""

    def on_trial_result(self, iteration: int, trials: list[Any], trial: Any,
                        result: dict[str, Any], **info: Any) -> None:
        if result["step"] == 3:
            raise KeyboardInterrupt


def test_interrupted_search_returns_partial_results_and_restores(storage: str) -> None:
    grid = tune.Tuner(checkpointing, run_config=tune.RunConfig(
        name="resume", storage_path=storage, verbose=0, callbacks=[Interrupt()])).fit()
    assert len(grid) == 1 and grid[0].metrics["step"] == 3
    assert grid[0].status == "PAUSED"
    path = os.path.join(storage, "resume")
    assert tune.Tuner.can_restore(path)
    restored = tune.Tuner.restore(path, checkpointing)
    restored._search.run_config.callbacks = []
    grid = restored.fit()
    result = grid[0]
    assert result.status == "TERMINATED" and result.error is None
    assert list(result.metrics_dataframe["step"]) == [1, 2, 3, 4, 5]
    assert list(result.metrics_dataframe["training_iteration"]) == [1, 2, 3, 4, 5]
    lines = (Path(result.path) / "result.json").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1, 2, 3, 4, 5]


def reports_pid(config: dict[str, Any]) -> None:
    tune.report({"pid": os.getpid(), "trial": tune.get_context().get_trial_id()})


@pytest.mark.parametrize("reuse", [True, False])
def test_reuse_actors(storage: str, reuse: bool) -> None:
    grid = tune.Tuner(reports_pid, param_space={"i": tune.grid_search(list(range(4)))},
                      tune_config=tune.TuneConfig(max_concurrent_trials=1, reuse_actors=reuse),
                      run_config=tune.RunConfig(storage_path=storage, verbose=0)).fit()
    pids = {r.metrics["pid"] for r in grid}
    assert [r.metrics["trial"] for r in grid] == [r.metrics["trial_id"] for r in grid]
    assert len(pids) == (1 if reuse else 4)


def test_with_parameters_and_resources(storage: str) -> None:
    import numpy as np

    data = np.arange(100_000)

    def uses_data(config: dict[str, Any], data: Any) -> None:
        tune.report({"total": int(data.sum()) * config["k"],
                     "cpus": tune.get_context().get_trial_resources().required_resources[
                         "CPU"]})

    trainable = tune.with_resources(tune.with_parameters(uses_data, data=data), {"cpu": 2})
    grid = tune.Tuner(trainable, param_space={"k": tune.grid_search([1, 2])},
                      run_config=tune.RunConfig(storage_path=storage, verbose=0)).fit()
    assert sorted(r.metrics["total"] for r in grid) == [int(data.sum()), 2 * int(data.sum())]
    assert {r.metrics["cpus"] for r in grid} == {2.0}


def test_trial_asking_for_more_than_the_cluster_has_is_an_error(storage: str) -> None:
    trainable = tune.with_resources(quadratic, {"cpu": 3})
    grid = tune.Tuner(trainable, param_space={"x": 1},
                      run_config=tune.RunConfig(storage_path=storage, verbose=0)).fit()
    assert grid[0].error is not None and "asks for 3 CPU but the cluster has 2" in str(
        grid[0].error)


class Counter(tune.Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.count = config.get("start", 0)

    def step(self) -> dict[str, Any]:
        self.count += 1
        return {"count": self.count, "done": self.count >= 5}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"count": self.count}

    def load_checkpoint(self, checkpoint: Any) -> None:
        self.count = checkpoint["count"]


def test_class_trainable_with_checkpoints(storage: str) -> None:
    grid = tune.Tuner(Counter, param_space={"start": tune.grid_search([0, 2])},
                      run_config=tune.RunConfig(
                          storage_path=storage, verbose=0,
                          checkpoint_config=tune.CheckpointConfig(
                              checkpoint_frequency=2, checkpoint_at_end=True))).fit()
    by_start = {r.config["start"]: r for r in grid}
    assert by_start[0].metrics["count"] == 5 and by_start[0].metrics["training_iteration"] == 5
    assert by_start[2].metrics["training_iteration"] == 3
    assert by_start[0].checkpoint is not None
    assert len(by_start[0].best_checkpoints) == 3  # at iterations 2 and 4, and at the end


def test_verbose_prints_compact_status_lines(storage: str, capsys: pytest.CaptureFixture[str]
                                             ) -> None:
    tune.Tuner(quadratic, param_space={"x": tune.grid_search([1, 2])},
               run_config=tune.RunConfig(storage_path=storage, verbose=1)).fit()
    out = capsys.readouterr().out.splitlines()
    assert sum("RUNNING" in line for line in out) == 2
    assert sum("TERMINATED after 4 iterations" in line for line in out) == 2
    assert out[-1].startswith("Search done: 2 trials (2 TERMINATED)")
    assert not any("iter 1" in line for line in out) and not any("+--" in ln for ln in out)
    tune.Tuner(quadratic, param_space={"x": 1},
               run_config=tune.RunConfig(storage_path=storage, verbose=0)).fit()
    assert capsys.readouterr().out == ""


@nbdist.remote(num_cpus=1)
def _times_ten(x: int) -> int:
    return x * 10


def in_group(config: dict[str, Any]) -> None:
    from nbdist.util.placement_group import get_current_placement_group
    from nbdist.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    group = get_current_placement_group()
    strategy = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=1)
    value = nbdist.get(_times_ten.options(scheduling_strategy=strategy).remote(config["x"]))
    tune.report({"value": value})


def test_a_trial_of_several_bundles_runs_in_its_placement_group(storage: str) -> None:
    trainable = tune.with_resources(in_group, tune.PlacementGroupFactory(
        [{"CPU": 1}, {"CPU": 1}]))
    grid = tune.Tuner(trainable, param_space={"x": tune.grid_search([1, 2])},
                      run_config=tune.RunConfig(storage_path=storage, verbose=0)).fit()
    assert grid.errors == [] and sorted(r.metrics["value"] for r in grid) == [10, 20]


def names(config: dict[str, Any]) -> None:
    context = tune.get_context()
    tune.report({"name": context.get_trial_name(), "dir": context.get_trial_dir()})


def test_trial_name_and_dirname_creators(storage: str) -> None:
    grid = tune.Tuner(names, param_space={"x": tune.grid_search([1, 2])},
                      tune_config=tune.TuneConfig(
                          trial_name_creator=lambda t: f"named_{t.config['x']}",
                          trial_dirname_creator=lambda t: f"dir_{t.config['x']}"),
                      run_config=tune.RunConfig(storage_path=storage, verbose=0)).fit()
    assert sorted(r.metrics["name"] for r in grid) == ["named_1", "named_2"]
    assert sorted(Path(r.metrics["dir"]).name for r in grid) == ["dir_1", "dir_2"]
    assert all(r.metrics["dir"] == r.path for r in grid)


class Resettable(tune.Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.value = config["v"]
        self.resets = 0

    def step(self) -> dict[str, Any]:
        return {"value": self.value, "pid": os.getpid(), "resets": self.resets, "done": True}

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        self.value = new_config["v"]
        self.resets += 1
        return True


def test_class_trainables_with_reset_config_reuse_their_actor(storage: str) -> None:
    grid = tune.Tuner(Resettable, param_space={"v": tune.grid_search([1, 2, 3])},
                      tune_config=tune.TuneConfig(max_concurrent_trials=1),
                      run_config=tune.RunConfig(storage_path=storage, verbose=0)).fit()
    assert [r.metrics["value"] for r in grid] == [1, 2, 3]
    assert len({r.metrics["pid"] for r in grid}) == 1
    assert [r.metrics["resets"] for r in grid] == [0, 1, 2]  # one instance, reset in place


def hangs_after_one_report(config: dict[str, Any]) -> None:
    import time

    tune.report({"pid": os.getpid()})
    time.sleep(600)  # deliberate sleep: a long step, so the stop decision never meets another report


def test_a_stopped_trial_that_never_reports_again_is_killed(
        storage: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from nbdist.tune.execution import controller

    monkeypatch.setattr(controller, "STOP_GRACE_S", 0.5)
    grid = tune.Tuner(hangs_after_one_report, run_config=tune.RunConfig(
        stop={"training_iteration": 1}, storage_path=storage, verbose=0)).fit()
    result = grid[0]
    assert result.status == "TERMINATED" and result.metrics["training_iteration"] == 1

    def gone(pid: int) -> bool:
        try:
            os.kill(pid, 0)
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        except (ProcessLookupError, OSError):
            return True

    poll(lambda: gone(result.metrics["pid"]), timeout=10, what="the trial's process to end")


def dies_after_reporting_past_its_checkpoint(config: dict[str, Any]) -> None:
    import tempfile
    import time

    marker = Path(config["marker"])
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        start = int(Path(checkpoint.path, "step").read_text())
    for step in range(start + 1, 6):
        if step % 2:  # a checkpoint every other step
            with tempfile.TemporaryDirectory() as d:
                Path(d, "step").write_text(str(step))
                tune.report({"step": step}, checkpoint=tune.Checkpoint.from_directory(d))
        else:
            tune.report({"step": step})
        if step == 4 and not marker.exists():
            marker.write_text("died")
            gate = Path(config["gate"])  # opened by the driver once it has step 4
            for _ in range(6000):  # at most ~60 s: the trial waits for the driver's gate
                if gate.exists():
                    break
                time.sleep(0.01)  # deliberate sleep: a trial cannot poll the driver's state
            os.kill(os.getpid(), 9)


class OpenGateAtStep4(tune.Callback):
    def __init__(self, gate: Path) -> None:
        self.gate = gate

    def on_trial_result(self, iteration: int, trials: list[Any], trial: Any,
                        result: dict[str, Any], **info: Any) -> None:
        if result["step"] == 4:
            self.gate.touch()


def test_a_retried_trial_redoes_the_reports_after_its_checkpoint(storage: str,
                                                                 tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    grid = tune.Tuner(dies_after_reporting_past_its_checkpoint,
                      param_space={"marker": str(tmp_path / "marker"), "gate": str(gate)},
                      run_config=tune.RunConfig(
                          storage_path=storage, verbose=0, callbacks=[OpenGateAtStep4(gate)],
                          failure_config=tune.FailureConfig(max_failures=1))).fit()
    frame = grid[0].metrics_dataframe
    assert list(frame["step"]) == [1, 2, 3, 4, 5]  # step 4 once: redone from step 3's state
    assert list(frame["training_iteration"]) == [1, 2, 3, 4, 5]

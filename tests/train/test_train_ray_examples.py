"""What Ray Train's own example programs rely on, run on nbdist.train with real workers: Ray
2.60's module paths (``ray.train.v2.api...``), its configuration fields (preemption, callbacks,
runtime environment, storage), ``report``'s upload modes, ``Result.from_path``, the torch
helpers (``get_devices``, ``enable_reproducibility``, ...) and the Keras callback.

docs/train.md ("Ray Train's examples") lists the examples and what each one needed.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from nbdist import train
from nbdist.train import DataParallelTrainer

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("cluster")]


def _report_three_checkpoints(config: dict[str, Any]) -> None:
    for i in range(3):
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "model.pt").write_text(str(i))
            train.report({"loss": i}, checkpoint=train.Checkpoint.from_directory(folder))


def test_ray_v2_module_paths_name_the_same_objects() -> None:
    expected = {
        "v2.api.data_parallel_trainer": {"DataParallelTrainer": train.DataParallelTrainer},
        "v2.api.config": {"ScalingConfig": train.ScalingConfig, "RunConfig": train.RunConfig,
                          "FailureConfig": train.FailureConfig,
                          "CheckpointConfig": train.CheckpointConfig},
        "v2.api.result": {"Result": train.Result},
        "v2.api.exceptions": {"TrainingFailedError": train.TrainingFailedError,
                              "WorkerGroupError": train.WorkerGroupError},
        "v2.api.train_fn_utils": {"report": train.report, "get_context": train.get_context,
                                  "get_preemption_info": train.get_preemption_info},
        "v2.api.callback": {"UserCallback": train.UserCallback},
        "v2.api.report_config": {"CheckpointUploadMode": train.CheckpointUploadMode},
        "data_parallel_trainer": {"DataParallelTrainer": train.DataParallelTrainer},
    }
    for module, names in expected.items():
        loaded = importlib.import_module(f"nbdist.train.{module}")
        for name, obj in names.items():
            assert getattr(loaded, name) is obj, f"nbdist.train.{module}.{name}"
    torch_trainer = importlib.import_module("nbdist.train.v2.torch.torch_trainer")
    assert torch_trainer.TorchTrainer is importlib.import_module("nbdist.train.torch").TorchTrainer


def test_result_from_path_reads_back_a_finished_run(tmp_path: Path) -> None:
    """Ray's key-concepts program: Result.path and .filesystem, then Result.from_path."""
    trainer = DataParallelTrainer(
        _report_three_checkpoints, scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name="concepts", storage_path=str(tmp_path),
                                   checkpoint_config=train.CheckpointConfig(num_to_keep=2)),
        metadata={"owner": "test"}, train_loop_config={"lr": 0.1})
    result = trainer.fit()
    import pyarrow.fs

    assert isinstance(result.filesystem, pyarrow.fs.LocalFileSystem)
    assert result.config == {"lr": 0.1}
    restored = train.Result.from_path(result.path)
    assert restored.metrics == result.metrics == {"loss": 2}
    assert restored.checkpoint == result.checkpoint
    assert [(c.path, m) for c, m in restored.best_checkpoints] == \
        [(c.path, m) for c, m in result.best_checkpoints]
    assert len(restored.best_checkpoints) == 2
    assert list(restored.metrics_dataframe["loss"]) == [0, 1, 2]
    with pytest.raises(RuntimeError, match="doesn't exist"):
        train.Result.from_path(tmp_path / "no-such-run")


def _preemption_probe(config: dict[str, Any]) -> list[Any]:
    seen = [train.get_preemption_info() for _ in range(3)]
    train.report({"seen": len(seen)})
    return seen


def test_preemption_fields_and_get_preemption_info(tmp_path: Path) -> None:
    """Ray's fault-tolerance program: FailureConfig's preemption fields construct, and no
    nbdist node announces a reclaim, so get_preemption_info() is None on every call."""
    failure = train.FailureConfig(max_failures=3, max_preemption_failures=-1,
                                  relax_collectives_on_preemption=True,
                                  preemption_grace_s=120.0)
    result = DataParallelTrainer(
        _preemption_probe, scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(storage_path=str(tmp_path), failure_config=failure),
    ).fit()
    assert result.return_value == [None, None, None]


def _upload_modes(config: dict[str, Any]) -> dict[str, bool]:
    rank = train.get_context().get_world_rank()
    asynchronous = tempfile.mkdtemp()
    Path(asynchronous, "a").write_text("async")
    train.report({"step": 0}, checkpoint=train.Checkpoint.from_directory(asynchronous),
                 checkpoint_upload_mode=train.CheckpointUploadMode.ASYNC)
    in_place = os.path.join(config["root"], f"in-place-{rank}")
    os.makedirs(in_place)
    Path(in_place, "b").write_text("no upload")
    train.report({"step": 1}, checkpoint=train.Checkpoint.from_directory(in_place),
                 checkpoint_upload_mode=train.CheckpointUploadMode.NO_UPLOAD)

    def upload(checkpoint: train.Checkpoint, destination: str) -> train.Checkpoint:
        os.makedirs(destination, exist_ok=True)  # every rank with a checkpoint calls it
        Path(destination, "uploaded-by").write_text("upload_fn")
        return train.Checkpoint(destination)

    custom = tempfile.mkdtemp()
    train.report({"step": 2}, checkpoint=train.Checkpoint.from_directory(custom),
                 checkpoint_upload_fn=upload)
    return {"async_deleted": not os.path.exists(asynchronous),
            "custom_kept": os.path.exists(custom)}


def test_report_upload_modes(tmp_path: Path) -> None:
    result = DataParallelTrainer(
        _upload_modes, train_loop_config={"root": str(tmp_path)},
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name="modes", storage_path=str(tmp_path)),
    ).fit()
    # ASYNC: copied under the run, then the reported directory deleted (on every rank).
    assert result.return_value == {"async_deleted": True, "custom_kept": True}
    kept = [c.path for c, _ in result.best_checkpoints]
    assert Path(kept[0], "a").read_text() == "async"
    assert kept[0].startswith(str(tmp_path / "modes"))
    # NO_UPLOAD: rank 0's directory is the checkpoint itself.
    assert kept[1] == str(tmp_path / "in-place-0")
    # checkpoint_upload_fn stores it where it chose.
    assert Path(kept[2], "uploaded-by").read_text() == "upload_fn"


def _two_reports(config: dict[str, Any]) -> None:
    rank = train.get_context().get_world_rank()
    for step in range(2):
        train.report({"step": step, "rank": rank})
    if config.get("fail") and rank == 1:
        raise ValueError("rank 1 gives up")


class Recorder:
    """Ray's UserCallback methods (any object with them will do)."""

    def __init__(self) -> None:
        self.reports: list[list[dict[str, Any]]] = []
        self.failures: list[dict[int, str]] = []
        self.names: set[str] = set()

    def after_report(self, run_context: Any, metrics: list[dict[str, Any]],
                     checkpoint: Any) -> None:
        self.names.add(run_context.experiment_name)
        self.reports.append(metrics)

    def after_exception(self, run_context: Any, worker_exceptions: dict[int, Any]) -> None:
        self.failures.append({r: str(e) for r, e in worker_exceptions.items()})


def test_user_callbacks_see_every_rank_and_failures(tmp_path: Path) -> None:
    def trainer(recorder: Recorder, fail: bool) -> DataParallelTrainer:
        return DataParallelTrainer(
            _two_reports, train_loop_config={"fail": fail},
            scaling_config=train.ScalingConfig(num_workers=2),
            run_config=train.RunConfig(name="callbacks", storage_path=str(tmp_path),
                                       callbacks=[recorder]))

    clean = Recorder()
    trainer(clean, fail=False).fit()
    assert clean.reports == [[{"step": s, "rank": 0}, {"step": s, "rank": 1}]
                             for s in range(2)]
    assert clean.names == {"callbacks"}
    assert clean.failures == []
    failing = Recorder()
    with pytest.raises(train.WorkerGroupError):
        trainer(failing, fail=True).fit()
    assert len(failing.failures) == 1 and list(failing.failures[0]) == [1]
    assert "rank 1 gives up" in failing.failures[0][1]


def _read_env(config: dict[str, Any]) -> str | None:
    return os.environ.get("NBDIST_EXAMPLE_FLAG")


def test_worker_runtime_env_vars_reach_the_workers_for_the_run_only(tmp_path: Path) -> None:
    run = train.RunConfig(storage_path=str(tmp_path),
                          worker_runtime_env={"env_vars": {"NBDIST_EXAMPLE_FLAG": "on"}})
    scaling = train.ScalingConfig(num_workers=2)
    assert DataParallelTrainer(_read_env, scaling_config=scaling,
                               run_config=run).fit().return_value == "on"
    # The next run may reuse the same processes: the variable must be gone.
    plain = train.RunConfig(storage_path=str(tmp_path))
    assert DataParallelTrainer(_read_env, scaling_config=scaling,
                               run_config=plain).fit().return_value is None
    with pytest.raises(NotImplementedError, match="pip"):
        DataParallelTrainer(_read_env, run_config=train.RunConfig(
            storage_path=str(tmp_path), worker_runtime_env={"pip": ["x"]})).fit()


def test_cloud_storage_path_is_refused_when_the_run_starts(tmp_path: Path,
                                                           monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    # Ray's examples build such configs without running them: construction must work.
    config = train.RunConfig(storage_path="s3://remote-bucket/location",
                             checkpoint_config=train.CheckpointConfig(num_to_keep=2))
    with pytest.raises(NotImplementedError, match="s3://"):
        DataParallelTrainer(_read_env, run_config=config).fit()
    assert list(tmp_path.iterdir()) == []  # nothing written under a local "s3:" folder


def _torch_helpers(config: dict[str, Any]) -> dict[str, Any]:
    import torch

    from nbdist.train import torch as ttorch

    def losses() -> list[float]:
        ttorch.enable_reproducibility(seed=7)
        model = ttorch.prepare_model(torch.nn.Linear(4, 1))
        optimizer = ttorch.prepare_optimizer(torch.optim.SGD(model.parameters(), lr=0.1))
        x = torch.randn(16, 4)
        out = []
        for _ in range(3):
            loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
            optimizer.zero_grad()
            ttorch.backward(loss)
            optimizer.step()
            out.append(loss.item())
        return out

    ttorch.accelerate(amp=False)
    try:
        ttorch.accelerate(amp=True)
        amp_error = ""
    except NotImplementedError as exc:
        amp_error = str(exc)
    return {"devices": [str(d) for d in ttorch.get_devices()], "first": losses(),
            "second": losses(), "amp_error": amp_error}


def test_torch_helpers_of_ray_train(tmp_path: Path) -> None:
    from nbdist.train.torch import TorchTrainer

    result = TorchTrainer(_torch_helpers, scaling_config=train.ScalingConfig(num_workers=2),
                          run_config=train.RunConfig(storage_path=str(tmp_path))).fit()
    value = result.return_value
    assert value["devices"] == ["cpu"]
    assert value["first"] == value["second"]  # same seed, same run
    assert value["first"][-1] < value["first"][0]  # backward and the optimizer did train
    assert "mixed precision" in value["amp_error"]


def _keras_fit(config: dict[str, Any]) -> None:
    import numpy as np
    from tensorflow import keras

    from nbdist.train.tensorflow.keras import ReportCheckpointCallback

    model = keras.Sequential([keras.Input(shape=(2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x = np.random.default_rng(0).normal(size=(64, 2)).astype("float32")
    model.fit(x, x.sum(axis=1), epochs=2, batch_size=16, verbose=0,
              callbacks=[ReportCheckpointCallback(metrics={"mse": "loss"})])


def test_keras_report_checkpoint_callback(tmp_path: Path) -> None:
    result = DataParallelTrainer(
        _keras_fit, run_config=train.RunConfig(name="keras", storage_path=str(tmp_path)),
    ).fit()
    assert [sorted(m) for m in result.metrics_dataframe.to_dict("records")] == [["mse"]] * 2
    assert len(result.best_checkpoints) == 2
    assert Path(result.checkpoint.path, "model.keras").is_file()

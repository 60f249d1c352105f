"""Worker reuse between fits: a clean run's workers serve the driver's next run of the same
backend (no new process, no second ``import torch``) while holding no CPU in between; a failed
group, or a worker whose user module was edited, is never reused; idle workers end with the
driver's cluster."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import train_helpers
from polling import poll

import nbdist
from nbdist import train
from nbdist.train import worker_pool
from nbdist.train.torch import TorchTrainer

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def fresh_cluster() -> Iterator[None]:
    if nbdist.is_initialized():
        nbdist.shutdown()
    nbdist.init(num_cpus=2)
    try:
        yield
    finally:
        if nbdist.is_initialized():
            nbdist.shutdown()


def allreduce_pid(config: dict[str, Any]) -> list[int]:
    """Every rank's pid in rank order (all_gather_object, a collective over this run's process
    group)."""
    import torch.distributed as dist

    pids: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(pids, os.getpid())
    train.report({"world": dist.get_world_size(), "port": int(os.environ["MASTER_PORT"])})
    return pids


def fit(function: Any, tmp_path: Path, config: dict[str, Any] | None = None,
        workers: int = 2, failures: int = 0) -> Any:
    return TorchTrainer(
        function, train_loop_config=config,
        scaling_config=train.ScalingConfig(num_workers=workers),
        run_config=train.RunConfig(storage_path=str(tmp_path),
                                   failure_config=train.FailureConfig(max_failures=failures)),
    ).fit()


@pytest.mark.usefixtures("fresh_cluster")
def test_a_later_fit_runs_in_the_idle_workers_of_a_clean_run(tmp_path: Path) -> None:
    first = fit(allreduce_pid, tmp_path)
    # Between runs the idle workers hold no CPU: other work can use the whole cluster.
    poll(lambda: nbdist.available_resources().get("CPU") == 2.0, what="both CPUs free")
    second = fit(allreduce_pid, tmp_path)
    assert second.return_value == first.return_value  # the same two processes, same ranks
    assert second.metrics["world"] == 2  # a new process group formed in them
    assert all(train_helpers.alive(pid) for pid in first.return_value)


def fail_on_rank_1(config: dict[str, Any]) -> None:
    Path(config["dir"], f"pid-{os.getpid()}").touch()
    if train.get_context().get_world_rank() == 1:
        raise ValueError("rank 1 fails")
    import torch.distributed as dist

    dist.barrier()  # rank 0 waits for rank 1 until the group is killed


@pytest.mark.usefixtures("fresh_cluster")
def test_a_failed_groups_workers_are_killed_not_reused(tmp_path: Path) -> None:
    first = fit(allreduce_pid, tmp_path)
    (tmp_path / "pids").mkdir()
    with pytest.raises(train.TrainingFailedError, match="rank 1 fails"):
        fit(fail_on_rank_1, tmp_path, {"dir": str(tmp_path / "pids")})
    failed = train_helpers.pids_in(str(tmp_path / "pids"))
    assert sorted(failed) == sorted(first.return_value)  # the failed run reused the clean one's
    poll(lambda: not any(train_helpers.alive(p) for p in failed), what="the failed group gone")
    again = fit(allreduce_pid, tmp_path)
    assert not set(again.return_value) & set(failed)


def import_user_module(config: dict[str, Any]) -> dict[str, Any]:
    sys.path.insert(0, config["dir"])
    import user_model

    return {"value": user_model.VALUE, "pid": os.getpid()}


@pytest.mark.usefixtures("fresh_cluster")
def test_a_worker_whose_user_module_was_edited_is_not_reused(tmp_path: Path) -> None:
    module = tmp_path / "user_model.py"
    module.write_text("VALUE = 1\n")
    config = {"dir": str(tmp_path)}
    first = fit(import_user_module, tmp_path, config, workers=1)
    assert first.return_value["value"] == 1
    module.write_text("VALUE = 2\n")
    later = time.time() + 5  # a modification time after the worker started, however coarse
    os.utime(module, (later, later))
    second = fit(import_user_module, tmp_path, config, workers=1)
    assert second.return_value["value"] == 2
    assert second.return_value["pid"] != first.return_value["pid"]
    poll(lambda: not train_helpers.alive(first.return_value["pid"]),
         what="the stale worker killed")


@pytest.mark.usefixtures("fresh_cluster")
def test_idle_workers_end_with_the_cluster_and_on_clear(tmp_path: Path) -> None:
    one = fit(allreduce_pid, tmp_path, workers=1).return_value
    worker_pool.clear()
    poll(lambda: not any(train_helpers.alive(p) for p in one), what="cleared workers gone")
    two = fit(allreduce_pid, tmp_path).return_value
    assert not set(two) & set(one)
    nbdist.shutdown()
    poll(lambda: not any(train_helpers.alive(p) for p in two), what="idle workers gone")

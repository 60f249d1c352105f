"""The Ray-backend variant: ``TorchTrainer`` unchanged on ``nbdist.init(backend="ray")``, its
gang reserved in a Ray placement group, DDP over gloo between its Ray actors, rank 0's
checkpoints kept, the workers of a clean run reused by the next one, and no worker process left
once the idle ones are ended."""

from __future__ import annotations

import json
import os
import tempfile
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

pytestmark = pytest.mark.timeout(300)
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    if nbdist.is_initialized():
        nbdist.shutdown()
    nbdist.init(backend="ray", num_cpus=2)
    try:
        yield
    finally:
        nbdist.shutdown()


def allreduce_loop(config: dict[str, Any]) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    ctx = train.get_context()
    for epoch in range(config["epochs"]):
        value = torch.tensor([float(ctx.get_world_rank() + 1 + epoch)])
        dist.all_reduce(value)
        saved = None
        if ctx.get_world_rank() == 0:
            folder = tempfile.mkdtemp()
            Path(folder, "state.json").write_text(json.dumps({"epoch": epoch}))
            saved = train.Checkpoint.from_directory(folder)
        train.report({"epoch": epoch, "sum": value.item()}, checkpoint=saved)
    return {"rank": ctx.get_world_rank(), "world_size": ctx.get_world_size(),
            "backend": dist.get_backend(), "pid": os.getpid()}


@pytest.mark.usefixtures("ray_cluster")
def test_a_ddp_run_on_the_ray_backend(tmp_path: Path) -> None:
    result = TorchTrainer(
        allreduce_loop, train_loop_config={"epochs": 3},
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name="on-ray", storage_path=str(tmp_path),
                                   checkpoint_config=train.CheckpointConfig(num_to_keep=1)),
    ).fit()
    assert list(result.metrics_dataframe["sum"]) == [3.0, 5.0, 7.0]  # (1 + 2) + 2 * epoch
    assert result.metrics == {"epoch": 2, "sum": 7.0}
    assert result.return_value["rank"] == 0 and result.return_value["world_size"] == 2
    assert result.return_value["backend"] == "gloo"
    assert result.checkpoint is not None
    assert json.loads((Path(result.checkpoint.path) / "state.json").read_text()) == {"epoch": 2}
    assert sorted(os.listdir(result.path)) == ["checkpoint_000002", "result_snapshot.json"]
    pid = result.return_value["pid"]
    assert pid != os.getpid()
    again = TorchTrainer(allreduce_loop, train_loop_config={"epochs": 1},
                         scaling_config=train.ScalingConfig(num_workers=2),
                         run_config=train.RunConfig(storage_path=str(tmp_path))).fit()
    assert again.metrics == {"epoch": 0, "sum": 3.0}
    assert again.return_value["pid"] == pid  # the idle worker of the first run
    poll(lambda: nbdist.available_resources().get("CPU") == 2.0, what="both CPUs free")
    worker_pool.clear()
    poll(lambda: not train_helpers.alive(pid), what="rank 0's worker gone once ended")

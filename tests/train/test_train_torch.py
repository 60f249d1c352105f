"""TorchTrainer with real worker processes: DDP over gloo, checkpoints kept per
CheckpointConfig, restarts after a worker dies, and a failed group killed whole."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import tempfile
from pathlib import Path
from typing import Any

import pytest
import train_helpers
from polling import poll, until

import nbdist
from nbdist import train
from nbdist.train import worker_pool
from nbdist.train.torch import TorchTrainer

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("cluster")]

EPOCHS = 5


def ddp_loop(config: dict[str, Any]) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, TensorDataset

    from nbdist.train.torch import get_device, prepare_data_loader, prepare_model

    ctx = train.get_context()
    # Each rank starts from different weights: DDP must make rank 0's everyone's.
    torch.manual_seed(ctx.get_world_rank())
    model = prepare_model(torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)))
    data = torch.Generator().manual_seed(0)
    x = torch.randn(256, 8, generator=data)
    y = x @ torch.linspace(-1, 1, 8).unsqueeze(1)
    loader = prepare_data_loader(
        DataLoader(TensorDataset(x, y, torch.arange(256)), batch_size=32, shuffle=True))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    seen: set[int] = set()
    for epoch in range(config["epochs"]):
        loader.sampler.set_epoch(epoch)
        total = 0.0
        for xb, yb, index in loader:
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            if epoch == 0:  # later epochs reshuffle the split (set_epoch)
                seen.update(index.tolist())
        checkpoint = None
        if ctx.get_world_rank() == 0:
            folder = tempfile.mkdtemp()
            torch.save(model.state_dict(), os.path.join(folder, "model.pt"))
            checkpoint = train.Checkpoint.from_directory(folder)
        train.report({"loss": total / len(loader), "epoch": epoch}, checkpoint=checkpoint)
    return {
        "env": {k: os.environ[k] for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE",
                                           "LOCAL_RANK")},
        "backend": dist.get_backend(), "device": str(get_device()), "seen": sorted(seen),
        "params": torch.cat([p.detach().flatten() for p in model.parameters()]),
        "rank": ctx.get_world_rank(), "local_rank": ctx.get_local_rank(),
        "world_size": ctx.get_world_size(),
    }


def gather_returns(config: dict[str, Any]) -> dict[str, Any]:
    """ddp_loop's return of every rank (all_gather_object), as rank 0's return value."""
    import torch.distributed as dist

    mine = ddp_loop(config)
    everyone: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    return {"ranks": everyone}


def test_two_ddp_workers_stay_equal_and_the_loss_falls(tmp_path: Path, run_updates: Any) -> None:
    trainer = TorchTrainer(
        gather_returns, train_loop_config={"epochs": EPOCHS},
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name="ddp", storage_path=str(tmp_path),
                                   checkpoint_config=train.CheckpointConfig(
                                       num_to_keep=2, checkpoint_score_attribute="loss",
                                       checkpoint_score_order="min")))
    result = trainer.fit()
    ranks = result.return_value["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert [r["local_rank"] for r in ranks] == [0, 1]
    assert all(r["backend"] == "gloo" and r["device"] == "cpu" for r in ranks)
    assert [r["env"]["RANK"] for r in ranks] == ["0", "1"]
    assert {r["env"]["WORLD_SIZE"] for r in ranks} == {"2"}
    assert ranks[0]["env"]["MASTER_PORT"] == ranks[1]["env"]["MASTER_PORT"]
    assert ranks[0]["params"].equal(ranks[1]["params"]), "the replicas diverged"
    # A DistributedSampler per rank: disjoint halves that cover the data set.
    assert not set(ranks[0]["seen"]) & set(ranks[1]["seen"])
    assert sorted(ranks[0]["seen"] + ranks[1]["seen"]) == list(range(256))

    losses = list(result.metrics_dataframe["loss"])
    assert len(losses) == EPOCHS and losses[-1] < losses[0] / 2, losses
    assert result.metrics == {"loss": losses[-1], "epoch": EPOCHS - 1}
    # The two best by loss (the last two, as the loss falls) are kept, and nothing else.
    kept = sorted(os.path.basename(c.path) for c, _ in result.best_checkpoints)
    assert kept == [f"checkpoint_{EPOCHS - 2:06d}", f"checkpoint_{EPOCHS - 1:06d}"]
    # Beside them, the record Result.from_path reads.
    assert sorted(os.listdir(result.path)) == sorted([*kept, "result_snapshot.json"])
    assert result.path == str(tmp_path / "ddp")
    assert result.checkpoint is not None and result.checkpoint.path.endswith(kept[-1])
    assert (Path(result.checkpoint.path) / "model.pt").exists()
    assert result.get_best_checkpoint("loss", "min") == result.checkpoint

    updates = poll(lambda: [u for u in run_updates.of("ddp") if u.status == "TERMINATED"]
                   and run_updates.of("ddp"), what="the run's TERMINATED records")
    for rank in (0, 1):
        mine = [u for u in updates if u.member == f"rank {rank}"]
        assert [u.iteration for u in mine if u.status == "RUNNING"] == list(range(EPOCHS + 1))
        assert mine[-1].status == "TERMINATED" and mine[-1].iteration == EPOCHS
    saved = [u for u in updates if u.note == "checkpoint saved"]
    assert {u.member for u in saved} == {"rank 0"} and len(saved) == EPOCHS
    assert dict(saved[-1].metrics)["loss"] == pytest.approx(losses[-1])


def resuming_loop(config: dict[str, Any]) -> None:
    import torch

    from nbdist.train.torch import prepare_model

    ctx = train.get_context()
    Path(config["dir"], f"pid-{os.getpid()}").touch()
    model = prepare_model(torch.nn.Linear(2, 1))
    start = 0
    checkpoint = train.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as folder:
            state = json.loads(Path(folder, "state.json").read_text())
        start = state["epoch"] + 1
    for epoch in range(start, config["epochs"]):
        marker = Path(config["dir"], "killed")
        if ctx.get_world_rank() == 1 and epoch == 2 and not marker.exists():
            marker.touch()
            train_helpers.kill_self()
        model(torch.ones(1, 2)).sum().backward()  # an allreduce: rank 0 waits for rank 1
        saved = None
        if ctx.get_world_rank() == 0:
            folder = tempfile.mkdtemp()
            Path(folder, "state.json").write_text(json.dumps({"epoch": epoch}))
            saved = train.Checkpoint.from_directory(folder)
        train.report({"epoch": epoch, "resumed_at": start}, checkpoint=saved)


def test_a_killed_worker_restarts_the_group_from_the_latest_checkpoint(
        tmp_path: Path, run_updates: Any) -> None:
    trainer = TorchTrainer(
        resuming_loop, train_loop_config={"epochs": 4, "dir": str(tmp_path)},
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name="resume", storage_path=str(tmp_path),
                                   failure_config=train.FailureConfig(max_failures=1)))
    result = trainer.fit()
    assert result.metrics == {"epoch": 3, "resumed_at": 2}
    assert list(result.metrics_dataframe["epoch"]) == [0, 1, 2, 3]
    assert list(result.metrics_dataframe["resumed_at"]) == [0, 0, 2, 2]
    # Two groups of two processes each (the failed one's survivor was not reused); none of
    # them is left once the clean group's idle workers are ended.
    pids = train_helpers.pids_in(str(tmp_path))
    assert len(pids) == 4
    worker_pool.clear()
    poll(lambda: not any(train_helpers.alive(p) for p in pids), what="no worker left")
    restarts = poll(lambda: [u for u in run_updates.of("resume") if u.status == "RESTARTING"],
                    what="RESTARTING records")
    assert {u.member for u in restarts} == {"rank 0", "rank 1"}
    assert restarts[0].note.startswith("restart 1 after worker 1 died: ActorDiedError"), \
        restarts[0].note


def raising_loop(config: dict[str, Any]) -> None:
    """Rank 0 ignores SIGTERM and waits in a collective for rank 1, which raises: what
    MultiWorkerMirroredStrategy does when a peer is gone."""
    import torch.distributed as dist

    rank = train.get_context().get_world_rank()
    if rank == 0:
        # libc's signal(): Python's own works only in the main thread, and training functions
        # run in a worker thread.
        ctypes.CDLL(None).signal(signal.SIGTERM, 1)  # SIG_IGN
        Path(config["dir"], f"pid-{os.getpid()}").touch()
        dist.barrier()
    until(lambda: train_helpers.pids_in(config["dir"]), timeout=30)
    raise ValueError(f"bad batch on rank {rank}")


def test_a_failure_without_restarts_left_kills_the_whole_group(tmp_path: Path) -> None:
    trainer = TorchTrainer(raising_loop, train_loop_config={"dir": str(tmp_path)},
                           scaling_config=train.ScalingConfig(num_workers=2),
                           run_config=train.RunConfig(storage_path=str(tmp_path)))
    with pytest.raises(train.TrainingFailedError) as caught:
        trainer.fit()
    error = caught.value
    assert isinstance(error.cause, ValueError) and "bad batch on rank 1" in str(error.cause)
    message = str(error)
    assert "worker 1 raised ValueError: bad batch on rank 1" in message
    assert "in raising_loop" in message  # the worker's own traceback
    assert "max_failures=0" in message
    [pid] = train_helpers.pids_in(str(tmp_path))
    poll(lambda: not train_helpers.alive(pid), what="the SIGTERM-proof rank 0 to be killed")


def noop() -> None:
    pass


def test_a_group_that_cannot_start_whole_starts_no_worker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    @nbdist.remote(num_cpus=1)
    class Holder:
        def ready(self) -> bool:
            return True

    holder = Holder.remote()
    nbdist.get(holder.ready.remote())
    monkeypatch.setenv("NBDIST_TRAIN_WORKER_GROUP_START_TIMEOUT_S", "2")
    trainer = TorchTrainer(noop, scaling_config=train.ScalingConfig(num_workers=2),
                           run_config=train.RunConfig(storage_path=str(tmp_path)))
    with pytest.raises(train.TrainingFailedError, match="could not be placed together within 2 s"):
        trainer.fit()
    nbdist.kill(holder)
    poll(lambda: nbdist.available_resources().get("CPU") == 2.0,
         what="both CPUs free again: no worker of the group kept one")


def test_a_group_larger_than_the_cluster_fails_at_once(tmp_path: Path) -> None:
    trainer = TorchTrainer(noop, scaling_config=train.ScalingConfig(num_workers=3),
                           run_config=train.RunConfig(storage_path=str(tmp_path)))
    with pytest.raises(train.TrainingFailedError, match="CPU: 3 needed, 2 in the cluster"):
        trainer.fit()


def write_shard(config: dict[str, Any]) -> None:
    rank = train.get_context().get_world_rank()
    shard = list(train.get_dataset_shard("train"))
    Path(config["dir"], f"shard-{rank}.json").write_text(json.dumps(shard))


def test_each_worker_reads_its_shard_of_a_dataset(tmp_path: Path) -> None:
    train.DataParallelTrainer(
        write_shard, train_loop_config={"dir": str(tmp_path)},
        datasets={"train": list(range(10))},
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(storage_path=str(tmp_path))).fit()
    shards = [json.loads((tmp_path / f"shard-{rank}.json").read_text()) for rank in (0, 1)]
    assert shards == [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]

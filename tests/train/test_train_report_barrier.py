"""``train.report`` is a step of the whole group, as in Ray Train: a round's checkpoint is
committed once every rank has made that report, every rank may add files to it (a sharded
checkpoint), no rank runs more than one report ahead of the slowest, and after a worker dies
the group restarts from the last round every rank reached."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
import train_helpers
from polling import until

from nbdist import train
from nbdist.train import DataParallelTrainer

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("cluster")]

EPOCHS = 6


def _shard(state: dict[str, Any]) -> train.Checkpoint:
    """A checkpoint holding this rank's file only (its shard of the model)."""
    folder = tempfile.mkdtemp()
    rank = train.get_context().get_world_rank()
    Path(folder, f"rank-{rank}.json").write_text(json.dumps(state))
    return train.Checkpoint.from_directory(folder)


def epochs_with_a_death(config: dict[str, Any]) -> None:
    """Each rank saves its own shard every epoch and resumes from it; rank 1's process is
    killed in epoch 3 of the first attempt, once rank 0 is in its report of epoch 3."""
    rank = train.get_context().get_world_rank()
    marks = Path(config["dir"])
    start = 0
    checkpoint = train.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as folder:
            start = json.loads(Path(folder, f"rank-{rank}.json").read_text())["epoch"] + 1
    for epoch in range(start, EPOCHS):
        (marks / f"trained-{rank}-{epoch}-from-{start}").touch()
        if rank == 1 and epoch == 3 and not (marks / "killed").exists():
            until(lambda: (marks / "reporting-0-3").exists(), timeout=60)
            (marks / "killed").touch()
            train_helpers.kill_self()
        if rank == 0:
            (marks / f"reporting-0-{epoch}").touch()
        train.report({"epoch": epoch, "resumed_at": start},
                     checkpoint=_shard({"epoch": epoch, "start": start}))


def test_a_dead_rank_stops_the_round_and_the_restart_resumes_where_all_ranks_were(
        tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    result = DataParallelTrainer(
        epochs_with_a_death, train_loop_config={"dir": str(marks)},
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name="death", storage_path=str(tmp_path / "runs"),
                                   failure_config=train.FailureConfig(max_failures=2)),
    ).fit()
    assert (marks / "killed").exists()
    # Epoch 3 was reported by rank 0 alone in the first attempt: never committed, so the
    # second attempt resumed after epoch 2, and rank 0 never got past that report.
    assert list(result.metrics_dataframe["epoch"]) == list(range(EPOCHS))
    assert list(result.metrics_dataframe["resumed_at"]) == [0, 0, 0, 3, 3, 3]
    assert not (marks / "trained-0-4-from-0").exists(), "rank 0 ran ahead of dead rank 1"
    # Every epoch was trained by both ranks in the attempt whose checkpoints were kept.
    for epoch in range(EPOCHS):
        start = 0 if epoch < 3 else 3
        for rank in (0, 1):
            assert (marks / f"trained-{rank}-{epoch}-from-{start}").exists(), (rank, epoch)
    # Each kept checkpoint holds both ranks' shards of the same epoch, from the attempt that
    # committed it; the failed attempt's epoch-3 files were not kept.
    names = [f"checkpoint_{epoch:06d}" for epoch in range(EPOCHS)]
    assert [os.path.basename(c.path) for c, _ in result.best_checkpoints] == names
    for epoch, name in enumerate(names):
        for rank in (0, 1):
            shard = json.loads((Path(result.path) / name / f"rank-{rank}.json").read_text())
            assert shard == {"epoch": epoch, "start": 0 if epoch < 3 else 3}, (name, rank)
    assert sorted(os.listdir(result.path)) == sorted([*names, "result_snapshot.json"])


def sharded(config: dict[str, Any]) -> list[list[str]]:
    """Three rounds, each rank adding its own file (and both a common one); the second round
    named by both ranks, the third by rank 0 only. Returns, per round, the files of the
    checkpoint ``get_checkpoint()`` names once the report returned."""
    rank = train.get_context().get_world_rank()
    seen = []
    for step in range(3):
        folder = tempfile.mkdtemp()
        Path(folder, f"shard-{rank}.txt").write_text(f"{rank}:{step}")
        Path(folder, "sub").mkdir()
        Path(folder, "sub", f"part-{rank}.txt").write_text(str(rank))
        name = None
        if step == 1 or (step == 2 and rank == 0):
            name = f"step-{step}"
        train.report({"step": step, "rank": rank}, checkpoint=train.Checkpoint(folder),
                     checkpoint_dir_name=name)
        checkpoint = train.get_checkpoint()
        assert checkpoint is not None
        seen.append(sorted(os.path.relpath(os.path.join(d, f), checkpoint.path)
                           for d, _, files in os.walk(checkpoint.path) for f in files))
    return seen


def test_every_rank_adds_its_files_to_the_rounds_checkpoint(tmp_path: Path) -> None:
    result = DataParallelTrainer(
        sharded, scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name="sharded", storage_path=str(tmp_path)),
    ).fit()
    files = ["shard-0.txt", "shard-1.txt", "sub/part-0.txt", "sub/part-1.txt"]
    # Once report returned, the round's checkpoint already held both ranks' files.
    assert result.return_value == [files, files, files]
    names = ["checkpoint_000000", "step-1", "step-2"]
    kept = [c.path for c, _ in result.best_checkpoints]
    assert kept == [str(tmp_path / "sharded" / name) for name in names]
    for step, path in enumerate(kept):
        assert Path(path, "shard-0.txt").read_text() == f"0:{step}"
        assert Path(path, "shard-1.txt").read_text() == f"1:{step}"
    # A round's metrics are rank 0's; rank 1's differently named directory was merged into
    # rank 0's, and nothing was left staged.
    assert list(result.metrics_dataframe["rank"]) == [0, 0, 0]
    assert sorted(os.listdir(result.path)) == sorted([*names, "result_snapshot.json"])


def slow_rank_one(config: dict[str, Any]) -> None:
    """Rank 1 gives rank 0 time to run ahead before each report; each rank writes down the
    steps at which it saw rank 0 begin a step before rank 1 had made the report of the step
    before."""
    rank = train.get_context().get_world_rank()
    marks = Path(config["dir"])
    ahead = []
    for step in range(3):
        if rank == 0:
            if step > 0 and not (marks / f"reporting-1-{step - 1}").exists():
                ahead.append(step)
            (marks / f"began-0-{step}").touch()
        else:
            # Waited for in full unless rank 0 runs ahead: with a barrier it never begins
            # the next step while this rank has not reported.
            if until(lambda s=step: (marks / f"began-0-{s + 1}").exists(), timeout=2):
                ahead.append(step + 1)
            (marks / f"reporting-1-{step}").touch()
        train.report({"step": step})
    (marks / f"ahead-{rank}.json").write_text(json.dumps(ahead))


def test_report_is_a_barrier_no_rank_runs_a_round_ahead(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    result = DataParallelTrainer(
        slow_rank_one, train_loop_config={"dir": str(marks)},
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name="barrier", storage_path=str(tmp_path / "runs")),
    ).fit()
    for rank in (0, 1):
        assert json.loads((marks / f"ahead-{rank}.json").read_text()) == [], rank
    assert list(result.metrics_dataframe["step"]) == [0, 1, 2]


def uneven_reports(config: dict[str, Any]) -> None:
    rank = train.get_context().get_world_rank()
    for step in range(2 if rank == 0 else 1):
        train.report({"step": step})


def test_a_rank_that_stops_reporting_fails_the_run_rather_than_hanging(
        tmp_path: Path) -> None:
    trainer = DataParallelTrainer(
        uneven_reports, scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name="uneven", storage_path=str(tmp_path)))
    with pytest.raises(train.TrainingFailedError) as caught:
        trainer.fit()
    message = str(caught.value)
    assert "worker 0 waits in its train.report number 2, which worker 1 never makes" in message
    assert "every worker must call train.report the same number of times" in message

"""The seed's ``Trainer(backend=...)``: start, run (values in rank order), shutdown, with a
real torch process group across worker processes."""

from __future__ import annotations

import os
from typing import Any

import pytest
import train_helpers
from polling import poll

from nbdist import train

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("cluster")]


def allreduce_rank(config: dict[str, Any]) -> tuple[int, float, int]:
    import torch
    import torch.distributed as dist

    value = torch.tensor([float(train.get_context().get_world_rank() + config["offset"])])
    dist.all_reduce(value)
    return train.get_context().get_world_rank(), value.item(), os.getpid()


def fails_on_rank_one() -> None:
    if train.get_context().get_world_rank() == 1:
        raise RuntimeError("rank one is out of data")


def test_trainer_runs_functions_on_one_group_until_shutdown() -> None:
    with train.Trainer(backend="torch", num_workers=2) as trainer:
        first = trainer.run(allreduce_rank, config={"offset": 0})
        second = trainer.run(allreduce_rank, config={"offset": 10})
    assert [(rank, total) for rank, total, _ in first] == [(0, 1.0), (1, 1.0)]
    assert [(rank, total) for rank, total, _ in second] == [(0, 21.0), (1, 21.0)]
    pids = [pid for _, _, pid in first]
    assert pids == [pid for _, _, pid in second], "run() started new workers"
    poll(lambda: not any(train_helpers.alive(p) for p in pids), what="workers gone")


def test_a_failed_run_stops_the_group_and_reports_the_workers_traceback() -> None:
    trainer = train.Trainer(backend="torch", num_workers=2)
    trainer.start()
    with pytest.raises(train.TrainingFailedError, match="rank one is out of data") as caught:
        trainer.run(fails_on_rank_one)
    assert "in fails_on_rank_one" in str(caught.value)
    with pytest.raises(RuntimeError, match="start"):
        trainer.run(fails_on_rank_one)
    trainer.shutdown()

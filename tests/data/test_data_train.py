"""A real TorchTrainer run fed by a dataset: each rank reads its own streaming shard
(``train.get_dataset_shard``), every epoch, with torch batches."""

from __future__ import annotations

from pathlib import Path

import pytest

from nbdist import data as rd
from nbdist import train

pytestmark = [pytest.mark.timeout(400), pytest.mark.usefixtures("cluster")]


def _loop(config: dict) -> None:
    import torch.distributed as dist

    shard = train.get_dataset_shard("train")
    for epoch in range(2):
        ids: list[int] = []
        steps = 0
        for batch in shard.iter_torch_batches(batch_size=32):
            ids.extend(int(i) for i in batch["id"])
            steps += 1
        dist.barrier()  # both ranks took the same number of steps, or this would not return
        train.report({"epoch": epoch, "steps": steps, "rows": len(ids), "first": min(ids),
                      "ids": ",".join(map(str, ids))})


def test_torch_trainer_ranks_read_disjoint_equal_shards(tmp_path: Path) -> None:
    from nbdist.train.torch import TorchTrainer

    ds = rd.range(1001, override_num_blocks=9).map_batches(lambda b: {"id": b["id"] * 3})
    trainer = TorchTrainer(
        _loop, datasets={"train": ds},
        scaling_config=train.ScalingConfig(num_workers=2, resources_per_worker={"CPU": 0.5}),
        run_config=train.RunConfig(name="data_fed", storage_path=str(tmp_path)))
    result = trainer.fit()
    assert result.error is None
    history = result.metrics_dataframe
    assert list(history["rows"]) == [500, 500]  # rank 0's two epochs: half of 1001, equal
    assert list(history["steps"]) == [16, 16]


def _scored(config: dict, train_ds: object) -> None:
    from nbdist import tune

    ds = train_ds.map_batches(lambda b: {"y": b["id"] * config["a"]})  # type: ignore[attr-defined]
    tune.report({"total": ds.sum("y"), "rows": ds.count()})


@pytest.mark.timeout(120)
def test_tune_passes_a_dataset_to_every_trial_with_parameters(tmp_path: Path) -> None:
    from nbdist import tune

    ds = rd.range(100, override_num_blocks=4)
    # One trial at a time: a trial's actor holds one CPU, and its dataset's tasks need the
    # other (two trials at once would hold both, and their data tasks would wait forever,
    # as on Ray).
    grid = tune.Tuner(
        tune.with_parameters(_scored, train_ds=ds),
        param_space={"a": tune.grid_search([1, 2])},
        tune_config=tune.TuneConfig(metric="total", mode="max", max_concurrent_trials=1),
        run_config=tune.RunConfig(name="data_params", storage_path=str(tmp_path), verbose=0),
    ).fit()
    assert sorted((r.config["a"], r.metrics["total"], r.metrics["rows"]) for r in grid) == [
        (1, 4950, 100), (2, 9900, 100)]

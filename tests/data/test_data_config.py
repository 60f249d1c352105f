"""``train.DataConfig`` with a real 2-worker trainer: a dataset named in
``datasets_to_split`` is split per rank (disjoint, equal shards), the others go whole to every
rank, and the execution options given are those of the ingest (a memory limit of one block
runs one block task at a time)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from nbdist import data as rd
from nbdist import train

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("cluster")]


def _stamped(folder: str):
    def stamp(batch: dict) -> dict:
        start = time.monotonic()
        time.sleep(0.05)  # deliberate sleep: a block task lasts long enough to overlap another
        path = os.path.join(folder, f"{int(batch['id'][0])}.json")
        with open(path, "w") as f:
            json.dump([start, time.monotonic()], f)
        return batch
    return stamp


def _loop(config: dict) -> None:
    ctx = train.get_context()
    out = {}
    for name in ("train", "val"):
        shard = train.get_dataset_shard(name)
        out[name] = [int(i) for b in shard.iter_batches(batch_size=16) for i in b["id"]]
    with open(os.path.join(config["dir"], f"rank{ctx.get_world_rank()}.json"), "w") as f:
        json.dump(out, f)


def test_split_only_the_named_datasets_and_apply_the_execution_options(tmp_path: Path) -> None:
    stamps = tmp_path / "stamps"
    stamps.mkdir()
    ctx = rd.DataContext.get_current()
    one_block = rd.ExecutionOptions(resource_limits=rd.ExecutionResources(
        object_store_memory=ctx.target_max_block_size))
    trainer = train.DataParallelTrainer(
        _loop, train_loop_config={"dir": str(tmp_path)},
        datasets={"train": rd.range(101, override_num_blocks=6)
                  .map_batches(_stamped(str(stamps)), num_cpus=0.25),
                  "val": rd.from_items([{"id": 1000 + i} for i in range(10)])},
        dataset_config=train.DataConfig(datasets_to_split=["train"],
                                        execution_options={"train": one_block}),
        scaling_config=train.ScalingConfig(num_workers=2, resources_per_worker={"CPU": 0.5}),
        run_config=train.RunConfig(name="data_config", storage_path=str(tmp_path)))
    assert trainer.fit().error is None
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    # "train" is split: disjoint shards of 50 rows each (101 rows, the remainder dropped).
    assert [len(r["train"]) for r in ranks] == [50, 50]
    assert not set(ranks[0]["train"]) & set(ranks[1]["train"])
    # "val" is not: every rank reads all of it.
    assert [r["val"] for r in ranks] == [list(range(1000, 1010))] * 2
    # The split's execution kept at most one block in flight: its block tasks never overlapped
    # (without the limit, four quarter-CPU tasks run at once on the CPU the ranks leave).
    spans = sorted(json.loads(p.read_text()) for p in stamps.iterdir())
    assert len(spans) == 6
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), spans


def test_data_config_checks_its_arguments_and_copies_the_context_options() -> None:
    with pytest.raises(TypeError, match="datasets_to_split"):
        train.DataConfig(datasets_to_split="train")
    with pytest.raises(TypeError, match="DataConfig"):
        train.DataParallelTrainer(lambda: None, dataset_config={"datasets_to_split": "all"})
    ctx = rd.DataContext.get_current()
    before = ctx.execution_options.resource_limits.cpu
    try:
        ctx.execution_options.resource_limits.cpu = 1
        options = train.DataConfig.default_ingest_options()
        assert options.resource_limits.cpu == 1 and options.preserve_order
        options.resource_limits.cpu = 3  # a copy: the context keeps its own
        assert ctx.execution_options.resource_limits.cpu == 1
    finally:
        ctx.execution_options.resource_limits.cpu = before

"""A dataset executed in a remote task, an actor or a Train worker shows in the driver's views:
its run records (one member per operator) reach the driver's event stream, marked with the
task and actor whose process published them; a worker that publishes none sends nothing."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from polling import poll

import nbdist
from nbdist import data as rd
from nbdist import train
from nbdist.ids import hex_id
from nbdist.jupyter.runs import RunsFold
from nbdist.jupyter.runview import RunViews

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("cluster")]


def _slow(batch: dict) -> dict:
    time.sleep(0.3)  # deliberate sleep: a block's work, so the run lasts over a second
    return {"id": batch["id"] * 2}


def _execute(n: int) -> int:
    rd.DataContext.get_current().enable_progress_bars = False
    ds = rd.range(n, override_num_blocks=8).map_batches(_slow)
    return sum(int(b["id"].sum()) for b in ds.iter_batches(batch_size=None))


def _data_records(**match: Any) -> list[Any]:
    return [e for e in nbdist.events.recent() if e.kind == "run_update"
            and e.library == "data" and all(getattr(e, k) == v for k, v in match.items())]


def _final_run(records: list[Any]) -> dict:
    fold = RunsFold()
    for e in records:
        fold.apply(e)
    runs = [r for r in fold.snapshot().values()
            if all(m["status"] == "TERMINATED" for m in r["members"].values())]
    assert len(runs) == 1, runs
    return runs[0]


def _relay_counts() -> tuple[bool, int, int]:
    from nbdist.daemons import worker as engine_worker
    from nbdist.driver import runtime

    relay = runtime.current().worker.relay  # type: ignore[attr-defined]
    assert isinstance(relay, engine_worker.RunRelay)
    return relay.thread is not None, relay.sent_messages, relay.sent_records


def test_a_dataset_executed_in_a_task_shows_its_operators_in_the_driver() -> None:
    before = len(_data_records())
    ref = nbdist.remote(num_cpus=0)(_execute).remote(400)
    assert nbdist.get(ref) == sum(range(400)) * 2
    # The worker sends the task's run records before its result: they are here already.
    records = _data_records()[before:]
    assert records and {e.task_id for e in records} == {hex_id(ref.id - 1)}  # its task's
    assert {e.actor_id for e in records} == {None}
    run = _final_run(records)
    [member] = run["members"].values()
    assert member["metrics"]["blocks"] == 8 and member["metrics"]["rows"] == 400


def _execute_given(ds: Any) -> int:
    rd.DataContext.get_current().enable_progress_bars = False
    return sum(len(b["id"]) for b in ds.iter_batches(batch_size=None))


def test_one_dataset_executed_in_two_tasks_is_two_runs_in_the_driver() -> None:
    before = len(_data_records())
    ds = rd.range(160, override_num_blocks=8).map_batches(_slow)  # made in the driver
    execute = nbdist.remote(num_cpus=0)(_execute_given)
    refs = [execute.remote(ds), execute.remote(ds)]
    assert nbdist.get(refs) == [160, 160]
    records = _data_records()[before:]
    runs: dict[str, list[Any]] = {}
    for e in records:
        runs.setdefault(e.run, []).append(e)
    # Each process numbers its executions on its own (two fresh workers both say
    # "<dataset>_0"): the worker's id in the name tells the runs apart, each with all 8
    # blocks of its own.
    assert len(runs) == 2, list(runs)
    assert {r.split("@")[0].rsplit("_", 1)[0] for r in runs} == {ds._name}
    assert len({r.split("@")[1] for r in runs}) == 2
    assert {e.task_id for e in records} == {hex_id(r.id - 1) for r in refs}
    for run_records in runs.values():
        [member] = _final_run(run_records)["members"].values()
        assert member["metrics"]["blocks"] == 8 and member["metrics"]["rows"] == 160


@nbdist.remote(num_cpus=0)
class Holder:
    def run(self, n: int) -> int:
        return _execute(n)

    def work(self, n: int) -> int:
        return sum(nbdist.get([_double.remote(i) for i in range(n)]))

    def relay(self) -> tuple[bool, int, int]:
        return _relay_counts()


@nbdist.remote(num_cpus=0)
def _double(i: int) -> int:
    return 2 * i


def test_a_dataset_executed_in_an_actor_shows_its_operators_in_the_driver() -> None:
    holder = Holder.remote()  # type: ignore[attr-defined]
    # An actor that has published no run records has sent none and runs no relay thread.
    assert nbdist.get(holder.relay.remote()) == (False, 0, 0)
    before = len(_data_records())
    assert nbdist.get(holder.run.remote(240)) == sum(range(240)) * 2
    records = poll(lambda: [e for e in _data_records()[before:] if e.status == "TERMINATED"]
                   and _data_records()[before:], timeout=10, what="the actor's run records")
    actor_id = hex_id(holder._actor_id)
    assert {e.actor_id for e in records} == {actor_id}
    run = _final_run(records)
    [member] = run["members"].values()
    assert member["metrics"]["blocks"] == 8 and member["metrics"]["rows"] == 240
    started, messages, sent = nbdist.get(holder.relay.remote())
    # Coalesced and batched: fewer messages than records, and no more records than the run's
    # updates (the operator publishes at most every 0.25 s, over about a second).
    assert started and 1 <= messages <= sent <= len(records) + 1
    nbdist.kill(holder)


def test_a_worker_without_run_records_sends_none() -> None:
    fresh = Holder.remote()  # type: ignore[attr-defined]
    before = len(_data_records())
    assert nbdist.get(fresh.work.remote(20)) == 380  # tasks submitted, waited on, returned
    # Nothing was relayed: no sender thread, no RUNS message, no record in the driver.
    assert nbdist.get(fresh.relay.remote()) == (False, 0, 0)
    assert len(_data_records()) == before
    nbdist.kill(fresh)


def _ingest(config: dict) -> None:
    shard = train.get_dataset_shard("train")
    rows = sum(len(b["id"]) for b in shard.iter_batches(batch_size=16))
    train.report({"rows": rows})


def test_a_train_run_shows_its_dataset_ingest_beside_its_ranks(tmp_path: Path) -> None:
    from nbdist.train import DataParallelTrainer

    before = len(_data_records())
    ds = rd.range(160, override_num_blocks=8).map_batches(_slow)
    trainer = DataParallelTrainer(
        _ingest, datasets={"train": ds},
        scaling_config=train.ScalingConfig(num_workers=2, resources_per_worker={"CPU": 0.5}),
        run_config=train.RunConfig(name="ingest_view", storage_path=str(tmp_path)))
    result = trainer.fit()
    assert result.error is None and result.metrics["rows"] == 80
    records = poll(lambda: [e for e in _data_records()[before:] if e.status == "TERMINATED"]
                   and _data_records()[before:], timeout=10, what="the ingest's run records")
    assert all(e.task_id is not None for e in records)
    run = _final_run(records)
    member = next(iter(run["members"].values()))
    assert "MapBatches(_slow)" in next(iter(run["members"]))
    assert member["metrics"]["rows"] == 160 and member["metrics"]["blocks"] == 8
    ranks = [e for e in nbdist.events.recent() if e.kind == "run_update"
             and e.library == "train" and e.run.startswith("ingest_view")]
    assert {e.member for e in ranks} >= {"rank 0", "rank 1"}
    # The inline views, fed the same records in order: one view in the cell (the Train
    # run's), with the ingest's lanes inside it, below its ranks, named by where they ran.
    shown: list[tuple[str | None, Any]] = []
    views = RunViews(lambda tag, widget: shown.append((tag, widget)), lambda: "cell-3")
    try:
        views.on_events([e for e in nbdist.events.recent() if e.kind == "run_update"
                         and (e in ranks or e in records)])
        [(tag, widget)] = shown
        train_view = next(v for k, v in views.views.items() if k.startswith("train:"))
        data_view = next(v for k, v in views.views.items() if k.startswith("data:"))
        assert tag == "cell-3" and widget is train_view.widget
        assert data_view.widget in train_view.widget.children
        assert "in actor" in data_view.title.value or "in task" in data_view.title.value
        assert "data-blocks='8'" in data_view.table.value
    finally:
        views.close()


def test_a_remote_run_goes_inside_the_cells_own_run_and_a_driver_run_stands_alone() -> None:
    def update(library: str, run: str, member: str, actor: str | None = None) -> Any:
        return nbdist.events.RunUpdate(1.0, library, run, member, "RUNNING", 1,
                                       (("rows", 1.0),), actor_id=actor)

    shown: list[tuple[str | None, Any]] = []
    views = RunViews(lambda tag, widget: shown.append((tag, widget)), lambda: "cell-9")
    try:
        views.on_events([update("tune", "search", "t1"),
                         update("train", "in_trial", "rank 0", actor="00aa00bb00cc00dd01"),
                         update("data", "dataset_1_0", "ReadRange")])
        tune_view = views.views["tune:search"]
        trial_run = views.views["train:in_trial"]
        driver_data = views.views["data:dataset_1_0"]
        # The driver's own runs are shown in the cell; the trial's Train run inside the search.
        assert [w for _, w in shown] == [tune_view.widget, driver_data.widget]
        assert trial_run.widget in tune_view.widget.children
        assert trial_run.where == "in actor " + "00aa00bb00cc00dd01"[-8:]
    finally:
        views.close()

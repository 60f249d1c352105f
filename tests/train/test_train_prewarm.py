"""Training workers prepared ahead of a driver's first fit(): ``import nbdist.train.torch`` in
a connected driver (or a TorchTrainer, when the import came first) starts workers that import
torch at once; the first fit runs in them, a fit during their import takes them rather than
starting more, ``NBDIST_TRAIN_PREWARM`` sets how many (0, or reuse off: none), and they end
with the cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import prewarm_probe
import pytest
import train_helpers
from polling import importable_env, poll

import nbdist
from nbdist import train
from nbdist.train import torch as train_torch
from nbdist.train import worker_pool
from nbdist.util.state import list_actors

pytestmark = pytest.mark.timeout(180)

# A notebook's order: connect, then import; fit once the prepared workers are ready.
DRIVER = """
import json, os, sys
import nbdist
from nbdist import train
import prewarm_probe

nbdist.init(num_cpus=2)
import nbdist.train.torch as train_torch

ready = train_torch.wait_ready(timeout=120)
prepared = sorted(prewarm_probe.torch_processes(os.getpid()))

def pids():
    import torch.distributed as dist
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, os.getpid())
    return every

result = train_torch.TorchTrainer(
    pids, scaling_config=train.ScalingConfig(num_workers=2),
    run_config=train.RunConfig(storage_path=sys.argv[1])).fit()
print(json.dumps({"ready": ready, "prepared": prepared, "fit": sorted(result.return_value)}))
nbdist.shutdown()
"""


def all_pids() -> list[int]:
    import torch.distributed as dist

    every: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(every, os.getpid())
    return every


def trainer(tmp_path: Path, workers: int = 2) -> train_torch.TorchTrainer:
    return train_torch.TorchTrainer(
        all_pids, scaling_config=train.ScalingConfig(num_workers=workers),
        run_config=train.RunConfig(storage_path=str(tmp_path)))


def train_actors() -> list[Any]:
    return list_actors(filters=[("class_name", "=", "TrainWorker")])


@pytest.fixture
def no_cluster() -> Iterator[None]:
    if nbdist.is_initialized():
        nbdist.shutdown()
    try:
        yield
    finally:
        if nbdist.is_initialized():
            nbdist.shutdown()


def test_the_first_fit_after_the_import_runs_in_workers_that_imported_torch(
        tmp_path: Path) -> None:
    env = importable_env()
    env["PYTHONPATH"] = str(Path(__file__).parent) + os.pathsep + env["PYTHONPATH"]
    done = subprocess.run([sys.executable, "-c", DRIVER, str(tmp_path)], capture_output=True,
                          text=True, timeout=150, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["ready"]
    assert len(seen["prepared"]) == 2  # torch loaded in both before fit() began
    assert seen["fit"] == seen["prepared"]


@pytest.mark.usefixtures("no_cluster")
def test_a_fit_during_the_preparation_takes_the_workers_being_prepared(tmp_path: Path) -> None:
    nbdist.init(num_cpus=2)
    run = trainer(tmp_path)  # imported before init: the trainer prepares the workers
    assert not train_torch.wait_ready(timeout=0)  # still importing torch
    pids = run.fit().return_value
    assert len(poll(train_actors, what="the TrainWorker actors")) == 2
    assert sorted(pids) == sorted(prewarm_probe.torch_processes(os.getpid()))


@pytest.mark.usefixtures("no_cluster")
def test_nbdist_train_prewarm_sets_the_count_and_zero_or_no_reuse_prepares_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(worker_pool.PREWARM_ENV, "1")
    nbdist.init(num_cpus=2)
    trainer(tmp_path)
    assert train_torch.wait_ready(timeout=120)
    assert len(prewarm_probe.torch_processes(os.getpid())) == 1
    assert len(train_actors()) == 1
    nbdist.shutdown()
    for off in ({worker_pool.PREWARM_ENV: "0"},
                {worker_pool.PREWARM_ENV: "2", worker_pool.REUSE_ENV: "0"}):
        for name, value in off.items():
            monkeypatch.setenv(name, value)
        nbdist.init(num_cpus=2)
        run = trainer(tmp_path, workers=1)
        assert train_torch.wait_ready(timeout=0), off  # nothing is importing
        run.fit()
        # Actor creations are published in the order they were made: a prepared worker
        # would be listed before the run's own.
        assert len(poll(train_actors, what="the run's TrainWorker")) == 1, off
        nbdist.shutdown()


@pytest.mark.usefixtures("no_cluster")
def test_prepared_workers_end_with_the_cluster_and_a_new_one_prepares_its_own(
        tmp_path: Path) -> None:
    nbdist.init(num_cpus=2)
    trainer(tmp_path)
    assert train_torch.wait_ready(timeout=120)
    first = prewarm_probe.torch_processes(os.getpid())
    assert len(first) == 2
    nbdist.shutdown()
    poll(lambda: not any(train_helpers.alive(p) for p in first), what="prepared workers gone")
    nbdist.init(num_cpus=2)
    trainer(tmp_path)
    assert train_torch.wait_ready(timeout=120)
    again = prewarm_probe.torch_processes(os.getpid())
    assert len(again) == 2 and not again & first

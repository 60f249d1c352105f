"""Workers kept apart by GPUs, as Ray keeps them: a task that needs GPUs never runs in a
worker process that ran a task without, nor the other way round (the shared cluster has one
logical GPU)."""

from __future__ import annotations

import os

import pytest

import nbdist

pytestmark = pytest.mark.timeout(120)

GET_S = 60.0


@nbdist.remote
def cpu_pid() -> int:
    return os.getpid()


@nbdist.remote(num_gpus=1)
def gpu_pid() -> int:
    return os.getpid()


@nbdist.remote(num_gpus=0.5)
def half_gpu_pid() -> int:
    return os.getpid()


def test_gpu_tasks_do_not_share_workers_with_cpu_tasks(cluster) -> None:
    first_cpu = nbdist.get(cpu_pid.remote(), timeout=GET_S)
    first_gpu = nbdist.get(gpu_pid.remote(), timeout=GET_S)
    assert first_gpu != first_cpu
    cpu_pids, gpu_pids = {first_cpu}, {first_gpu}
    for _ in range(3):  # one after the other, so idle workers of both kinds are there
        cpu_pids.add(nbdist.get(cpu_pid.remote(), timeout=GET_S))
        gpu_pids.add(nbdist.get(gpu_pid.remote(), timeout=GET_S))
        gpu_pids.add(nbdist.get(half_gpu_pid.remote(), timeout=GET_S))
    assert not cpu_pids & gpu_pids, (cpu_pids, gpu_pids)
    # A GPU worker is reused for GPU tasks (the pool does not start one per task).
    assert len(gpu_pids) < 7

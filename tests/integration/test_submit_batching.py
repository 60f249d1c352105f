"""Bursts of submissions from a driver travel to the node in batches (`CoreClient.submit`).

A submission that follows the one before within ``BURST_S`` is queued with the process's ref
holds and releases, in order, and sent by the flusher thread, or ahead of the next message or
wait. What a user sees must not change: tasks nobody waits for still run, a ref released right
after its submission still reaches the task, and a direct actor call given the ref of a task
still in the batch finds it.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from polling import poll

import nbdist
from nbdist.driver import runtime

pytestmark = pytest.mark.timeout(120)

TASKS = 300


@nbdist.remote
def mark(folder: str, i: int, values: Any = None) -> None:
    name = f"{i}" if values is None else f"{i}-{int(values.sum())}"
    open(os.path.join(folder, name), "w").close()


@nbdist.remote
def square(x: int) -> int:
    return x * x


@nbdist.remote
class Echo:
    def value(self, x: int) -> int:
        return x


def test_a_burst_nobody_waits_for_runs_every_task(cluster: Any, tmp_path: Any) -> None:
    folder = str(tmp_path)
    for i in range(TASKS):
        mark.remote(folder, i)  # the ref is dropped at once: its release follows the task
    poll(lambda: len(os.listdir(folder)) == TASKS, timeout=60,
         what=f"{TASKS} tasks submitted in a burst, with no get, ran")
    assert sorted(int(n) for n in os.listdir(folder)) == list(range(TASKS))


def test_arguments_released_right_after_a_batched_submission_reach_their_tasks(
        cluster: Any, tmp_path: Any) -> None:
    folder = str(tmp_path)
    client = runtime.current()
    batched_before = client.batched_submissions
    for i in range(50):
        # A stored argument whose only ref is released as soon as the task is submitted.
        mark.remote(folder, i, nbdist.put(np.full(100_000, i, dtype=np.int64)))
        square.remote(i)  # two in a row: the second is within the burst
    assert client.batched_submissions > batched_before, "the burst was not batched"
    poll(lambda: len(os.listdir(folder)) == 50, timeout=60, what="50 tasks ran")
    assert sorted(os.listdir(folder)) == sorted(f"{i}-{i * 100_000}" for i in range(50))


def test_a_direct_call_given_a_task_still_in_the_batch_gets_its_value(cluster: Any) -> None:
    echo = Echo.remote()
    assert nbdist.get(echo.value.remote(1)) == 1  # later calls go over the direct link
    refs = [square.remote(i) for i in range(200)]
    assert nbdist.get([echo.value.remote(ref) for ref in refs[-5:]]) == [
        i * i for i in range(195, 200)]
    assert nbdist.get(refs) == [i * i for i in range(200)]

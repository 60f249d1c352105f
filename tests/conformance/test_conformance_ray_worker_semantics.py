"""Workers as Ray 2.60 runs them, on both backends:

- ``OMP_NUM_THREADS`` in a task's (or an actor's) process is its CPUs, rounded down and at
  least 1 (1 for the defaults), set anew for each task a reused worker runs, unless the
  runtime_env's ``env_vars`` give it;
- a plain actor orders calls per caller: a call whose arguments are ready runs while another
  caller's earlier call still waits for its own; one caller's calls keep their order.

Blocked calls end by a call that releases them, never by a timer.
"""

from __future__ import annotations

import asyncio
import os

import pytest
from polling import until

import nbdist as ray

pytestmark = pytest.mark.timeout(180)

GET_S = 60.0


@ray.remote
def omp() -> str | None:
    return os.environ.get("OMP_NUM_THREADS")


@ray.remote
class OmpActor:
    def omp(self) -> str | None:
        return os.environ.get("OMP_NUM_THREADS")


def test_omp_num_threads_follows_each_tasks_cpus(backend: str) -> None:
    # Alternating shapes on two CPUs: workers are reused, and each task sees its own value.
    shapes = [2, 1, 0.5, 2, 1, 2, 1]
    got = ray.get([omp.options(num_cpus=n).remote() for n in shapes] + [omp.remote()],
                  timeout=GET_S)
    assert got == ["2", "1", "1", "2", "1", "2", "1", "1"]
    env = {"env_vars": {"OMP_NUM_THREADS": "3"}}
    assert ray.get(omp.options(runtime_env=env).remote(), timeout=GET_S) == "3"
    assert ray.get(omp.options(num_cpus=1, runtime_env=env).remote(), timeout=GET_S) == "3"


def test_omp_num_threads_of_an_actor_is_its_cpus(backend: str) -> None:
    got = []
    for cpus in (None, 2, 0.25):  # one at a time: two CPUs hold only one with 2
        actor = OmpActor.remote() if cpus is None else OmpActor.options(num_cpus=cpus).remote()
        got.append(ray.get(actor.omp.remote(), timeout=GET_S))
        ray.kill(actor)
    assert got == ["1", "2", "1"]


@ray.remote
class Gate:
    """Holds ``wait`` calls until ``open``; ``note``/``noted`` tell that a caller got far."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.notes = 0

    async def wait(self) -> str:
        await self.event.wait()
        return "opened"

    async def open(self) -> None:
        self.event.set()

    async def note(self) -> None:
        self.notes += 1

    async def noted(self) -> int:
        return self.notes


@ray.remote
def through(gate) -> str:
    return ray.get(gate.wait.remote())


@ray.remote
class Recorder:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def record(self, label: str, value: object = None) -> str:
        self.seen.append(label)
        return label

    def log(self) -> list[str]:
        return list(self.seen)


@ray.remote(num_cpus=0)
def call_gated(recorder, gate) -> str:
    """Another caller: a call whose argument waits on the gate, then a later one of its own."""
    first = recorder.record.remote("gated", through.remote(gate))
    after = recorder.record.remote("after gated")
    ray.get(gate.note.remote())
    return ray.get([first, after], timeout=GET_S)


def test_plain_actor_orders_calls_per_caller(backend: str) -> None:
    gate, recorder = Gate.remote(), Recorder.remote()
    ray.get(recorder.log.remote(), timeout=GET_S)
    other = call_gated.remote(recorder, gate)
    until(lambda: ray.get(gate.noted.remote(), timeout=GET_S) == 1, timeout=GET_S)
    # The other caller's call waits for its argument; this caller's does not wait for it.
    assert ray.get(recorder.record.remote("driver"), timeout=GET_S) == "driver"
    assert ray.get(recorder.log.remote(), timeout=GET_S) == ["driver"]
    ray.get(gate.open.remote(), timeout=GET_S)
    assert ray.get(other, timeout=GET_S) == ["gated", "after gated"]
    assert ray.get(recorder.log.remote(), timeout=GET_S) == ["driver", "gated", "after gated"]

"""Faults: worker processes that die mid-task, actor restarts, cancellation, retries.

Each test gets a cluster of its own (``fresh_cluster``), since it kills processes on purpose.
A marker file in ``tmp_path`` makes a task misbehave on its first attempt only.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from polling import retrying, until

import nbdist
from nbdist import exceptions

pytestmark = [pytest.mark.timeout(90), pytest.mark.usefixtures("fresh_cluster")]


def _crash(how: str) -> None:
    if how == "exit":
        os._exit(1)
    os.kill(os.getpid(), signal.SIGKILL)


@nbdist.remote
def crash_first_attempt(marker: str, how: str, value: int) -> tuple[int, int]:
    if not os.path.exists(marker):
        Path(marker).write_text(str(os.getpid()))
        _crash(how)
    return value * 2, os.getpid()


@pytest.mark.parametrize("how", ["exit", "sigkill"])
def test_task_whose_worker_dies_is_retried(tmp_path: Path, how: str) -> None:
    marker = tmp_path / "attempted"
    value, pid = nbdist.get(crash_first_attempt.remote(str(marker), how, 21), timeout=60)
    assert value == 42
    assert pid != int(marker.read_text()), "the retry claims to run in the process that died"


def test_explicit_max_retries_retries_a_crash(tmp_path: Path) -> None:
    marker = tmp_path / "attempted"
    ref = crash_first_attempt.options(max_retries=1).remote(str(marker), "sigkill", 5)
    assert nbdist.get(ref, timeout=60)[0] == 10


def test_worker_crash_without_retries_raises_worker_crashed_error(tmp_path: Path) -> None:
    marker = tmp_path / "attempted"
    ref = crash_first_attempt.options(max_retries=0).remote(str(marker), "exit", 1)
    with pytest.raises(exceptions.WorkerCrashedError):
        nbdist.get(ref, timeout=60)
    assert marker.exists()
    # The cluster keeps working after losing a worker.
    assert nbdist.get(crash_first_attempt.remote(str(marker), "exit", 4), timeout=60)[0] == 8


class FlakyError(Exception):
    pass


@nbdist.remote
def raise_first_attempt(marker: str) -> str:
    if not os.path.exists(marker):
        Path(marker).touch()
        raise FlakyError("first attempt fails")
    return "second attempt"


def test_application_errors_are_retried_only_when_asked(tmp_path: Path) -> None:
    once = raise_first_attempt.options(max_retries=1, retry_exceptions=True)
    assert nbdist.get(once.remote(str(tmp_path / "a")), timeout=60) == "second attempt"

    with pytest.raises(FlakyError):
        nbdist.get(raise_first_attempt.options(max_retries=1).remote(str(tmp_path / "b")))


@nbdist.remote
class Phoenix:
    def __init__(self) -> None:
        self.value = 0

    def increment(self) -> int:
        self.value += 1
        return self.value

    def pid(self) -> int:
        return os.getpid()

    def die(self) -> None:
        os._exit(1)


def _call(ref_factory, *, timeout: float = 30):
    # A restarting actor may answer "unavailable, try again" (Ray does too); anything else counts.
    return retrying(lambda: nbdist.get(ref_factory(), timeout=timeout),
                    on=exceptions.ActorUnavailableError, timeout=timeout)


def test_actor_is_restarted_up_to_max_restarts_with_fresh_state() -> None:
    actor = Phoenix.options(max_restarts=1).remote()
    assert nbdist.get(actor.increment.remote()) == 1
    assert nbdist.get(actor.increment.remote()) == 2
    first_pid = nbdist.get(actor.pid.remote())

    with pytest.raises(exceptions.RayActorError):
        nbdist.get(actor.die.remote(), timeout=30)

    assert _call(actor.increment.remote) == 1, "a restarted actor starts from __init__"
    assert _call(actor.pid.remote) != first_pid

    with pytest.raises(exceptions.RayActorError):
        nbdist.get(actor.die.remote(), timeout=30)
    with pytest.raises(exceptions.ActorDiedError):
        _call(actor.increment.remote)


def test_actor_without_restarts_dies_for_good() -> None:
    actor = Phoenix.remote()
    assert nbdist.get(actor.increment.remote()) == 1
    with pytest.raises(exceptions.RayActorError):
        nbdist.get(actor.die.remote(), timeout=30)
    for _ in range(2):
        with pytest.raises(exceptions.ActorDiedError):
            nbdist.get(actor.increment.remote(), timeout=30)


@nbdist.remote
class CrashOnce:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def work(self, x: int) -> int:
        if not os.path.exists(self.marker):
            Path(self.marker).touch()
            os._exit(1)
        return x + 1


def test_actor_task_is_retried_on_the_restarted_actor(tmp_path: Path) -> None:
    actor = CrashOnce.options(max_restarts=1, max_task_retries=1).remote(str(tmp_path / "m"))
    assert nbdist.get(actor.work.remote(1), timeout=60) == 2


@nbdist.remote
def block_until(started: str, gate: str) -> str:
    Path(started).touch()
    opened = until(lambda: os.path.exists(gate), timeout=60)
    return "released" if opened else "gate never opened"


@pytest.mark.parametrize("force", [True, False])
def test_cancel_of_a_running_task(tmp_path: Path, wait_until, force: bool) -> None:
    started = tmp_path / "started"
    ref = block_until.remote(str(started), str(tmp_path / "never"))
    wait_until(started.exists, timeout=30, what="the task to start")
    nbdist.cancel(ref, force=force)
    with pytest.raises(exceptions.TaskCancelledError):
        nbdist.get(ref, timeout=30)
    assert nbdist.get(block_until.remote(str(tmp_path / "s2"), str(started))) == "released"


def test_cancel_of_a_queued_task(tmp_path: Path, wait_until) -> None:
    started, gate = tmp_path / "started", tmp_path / "gate"
    blocker = block_until.options(num_cpus=2).remote(str(started), str(gate))
    wait_until(started.exists, timeout=30, what="the blocking task to start")

    queued_started = tmp_path / "queued-started"
    queued = block_until.remote(str(queued_started), str(gate))
    nbdist.cancel(queued)
    with pytest.raises(exceptions.TaskCancelledError):
        nbdist.get(queued, timeout=30)
    gate.touch()
    assert nbdist.get(blocker, timeout=30) == "released"
    assert not queued_started.exists(), "the cancelled task ran anyway"

"""The helpers of ``ray._private.test_utils`` / ``ray._common.test_utils`` that Ray's core unit
tests use, written on nbdist's public API (nbdist has no ``ray._private``).

A helper that needs Ray's internals (its GCS, its pubsub of errors) is not here: a test that
uses it fails on nbdist, as it should, with the name it wanted.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from nbdist_as_ray import Missing

import nbdist


@nbdist.remote(num_cpus=0)
class SignalActor:
    """``wait`` (async) returns once ``send`` has been called; ``cur_num_waiters`` counts the
    calls waiting."""

    def __init__(self) -> None:
        self.ready_event = asyncio.Event()
        self.num_waiters = 0

    def send(self, clear: bool = False) -> None:
        self.ready_event.set()
        if clear:
            self.ready_event.clear()

    async def wait(self, should_wait: bool = True) -> None:
        if not should_wait:
            return
        self.num_waiters += 1
        try:
            await self.ready_event.wait()
        finally:
            self.num_waiters -= 1

    async def cur_num_waiters(self) -> int:
        return self.num_waiters


@nbdist.remote(num_cpus=0)
class Semaphore:
    """An asyncio semaphore in an actor: ``acquire``, ``release``, ``locked``."""

    def __init__(self, value: int = 1) -> None:
        self._sema = asyncio.Semaphore(value=value)

    async def acquire(self) -> None:
        await self._sema.acquire()

    async def release(self) -> None:
        self._sema.release()

    async def locked(self) -> bool:
        return self._sema.locked()


def wait_for_condition(
    condition_predictor: Callable[..., bool],
    timeout: float = 10,
    retry_interval_ms: float = 100,
    raise_exceptions: bool = False,
    **kwargs: Any,
) -> None:
    """Poll ``condition_predictor(**kwargs)`` until true; ``RuntimeError`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() <= deadline:
        try:
            if condition_predictor(**kwargs):
                return
        except Exception:
            if raise_exceptions:
                raise
            last_error = traceback.format_exc()
        time.sleep(retry_interval_ms / 1000.0)
    message = "The condition wasn't met before the timeout expired."
    if last_error is not None:
        message += f" Last exception: {last_error}"
    raise RuntimeError(message)


async def async_wait_for_condition(
    condition_predictor: Callable[..., Any],
    timeout: float = 10,
    retry_interval_ms: float = 100,
    **kwargs: Any,
) -> None:
    """:func:`wait_for_condition` for a coroutine (or plain) predicate, awaited."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() <= deadline:
        try:
            result = condition_predictor(**kwargs)
            if inspect.isawaitable(result):
                result = await result
            if result:
                return
        except Exception as error:
            last_error = error
        await asyncio.sleep(retry_interval_ms / 1000.0)
    message = "The condition wasn't met before the timeout expired."
    if last_error is not None:
        message += f" Last exception: {last_error}"
    raise RuntimeError(message)


def wait_for_pid_to_exit(pid: int, timeout: float = 20) -> None:
    """Return once process ``pid`` is gone; ``TimeoutError`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise TimeoutError(f"Timed out while waiting for process {pid} to exit.")


def kill_actor_and_wait_for_failure(
    actor: Any, timeout: float = 10, retry_interval_ms: float = 100
) -> None:
    """``kill`` the actor, then return once a call to it fails as a dead actor's does."""
    nbdist.kill(actor)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            nbdist.get(actor.__ray_ready__.remote(), timeout=retry_interval_ms / 1000.0)
        except nbdist.exceptions.RayActorError:
            return
        except nbdist.exceptions.GetTimeoutError:
            pass
        time.sleep(retry_interval_ms / 1000.0)
    raise RuntimeError("It took too much time to kill an actor")


def client_test_enabled() -> bool:
    """Ray Client mode: never, here."""
    return False


def client_mode_should_convert() -> bool:
    """``ray._private.client_mode_hook``'s question (is this a Ray Client call?): no."""
    return False


def run_string_as_driver(
    driver_script: str, env: dict | None = None, encode: str = "utf-8", timeout: float = 300
) -> str:
    """Run ``driver_script`` in a new Python process and return its output (stdout and
    stderr); ``CalledProcessError`` if it exits non-zero. The process reads ``import ray`` as
    nbdist's (the runner's ``sitecustomize`` does it when ``NBDIST_AS_RAY=1``)."""
    env = dict(os.environ if env is None else env)
    env.setdefault("NBDIST_AS_RAY", "1")
    proc = subprocess.run(
        [sys.executable, "-"],
        input=driver_script.encode(encode),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        timeout=timeout,
    )
    output = proc.stdout.decode(encode, errors="replace")
    if proc.returncode:
        print(output)
        raise subprocess.CalledProcessError(proc.returncode, proc.args, output)
    return output


def run_string_as_driver_nonblocking(driver_script: str, env: dict | None = None) -> Any:
    """Start ``driver_script`` in a new Python process; return the ``Popen``."""
    env = dict(os.environ if env is None else env)
    env.setdefault("NBDIST_AS_RAY", "1")
    proc = subprocess.Popen(
        [sys.executable, "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None
    proc.stdin.write(driver_script.encode("utf-8"))
    proc.stdin.close()
    return proc


def __getattr__(name: str) -> Missing:
    """A helper of Ray's that is not here (it needs Ray's internals) fails where it is used."""
    if name.startswith("__"):
        raise AttributeError(name)
    return Missing(f"ray._private.test_utils.{name}")

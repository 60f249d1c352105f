"""Waiting for a condition in tests: the one place with a polling loop; every test folder uses it.

- ``poll(predicate)``: the first truthy value of ``predicate()``; fails the test on timeout,
  naming what never happened and the last value seen.
- ``until(predicate)``: the same wait without pytest: returns the last value, truthy or not.
  For code that reports a timeout its own way: remote task bodies (a gate a test opens),
  driver scripts and kernel cells, and inner waits that retry.
- ``retrying(call, on=Error)``: ``call()``'s value once it stops raising ``Error`` (an actor
  that is restarting); re-raises the last such error on timeout.
- ``poll_settled(measure)``: the value once it has stopped changing (memory after a free).

Importable as ``from polling import poll``: pytest puts ``tests/`` on ``sys.path`` for the
conftest there. Processes a test starts (driver scripts, clusters started with the ``nbdist``
command, kernels, and the workers these start) import it too when started with
``importable_env()``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

TESTS_DIR = str(Path(__file__).resolve().parent)

T = TypeVar("T")


def until(predicate: Callable[[], Any], *, timeout: float, interval: float = 0.02) -> Any:
    """Return the first truthy value of ``predicate()``, or its last value after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def poll(
    predicate: Callable[[], Any], *, timeout: float = 10.0, interval: float = 0.02, what: str = ""
) -> Any:
    """Return the first truthy value of ``predicate()``; fail the test after ``timeout`` s."""
    value = until(predicate, timeout=timeout, interval=interval)
    if not value:
        pytest.fail(f"timed out after {timeout} s waiting for: {what or repr(predicate)} "
                    f"(last value: {value!r})")
    return value


def retrying(
    call: Callable[[], T], *, on: type[BaseException] | tuple[type[BaseException], ...],
    timeout: float, interval: float = 0.05,
) -> T:
    """Return ``call()``'s value once it does not raise ``on``; after ``timeout`` s re-raise
    the last such error (its message says more than a timeout would)."""
    errors: list[BaseException] = []

    def attempt() -> tuple[T] | None:
        try:
            return (call(),)
        except on as exc:
            errors[:] = [exc]
            return None

    outcome = until(attempt, timeout=timeout, interval=interval)
    if outcome is None:
        raise errors[-1]
    return outcome[0]


def poll_settled(
    measure: Callable[[], Sequence[float]], *, tolerance: float, quiet: float = 1.0,
    timeout: float = 60.0, interval: float = 0.05, what: str = "",
) -> tuple[float, ...]:
    """Return ``measure()`` once no figure of it has moved more than ``tolerance`` for
    ``quiet`` s; fail the test if it is still moving after ``timeout`` s."""
    samples: list[tuple[float, tuple[float, ...]]] = []

    def steady() -> tuple[float, ...] | None:
        now, value = time.monotonic(), tuple(measure())
        samples.append((now, value))
        while len(samples) > 1 and now - samples[1][0] >= quiet:
            samples.pop(0)  # the oldest sample left is the last one at least ``quiet`` s old
        if now - samples[0][0] < quiet:
            return None
        moved = any(abs(a - b) > tolerance
                    for _, old in samples for a, b in zip(old, value, strict=True))
        return None if moved else value

    settled = until(steady, timeout=timeout, interval=interval)
    if settled is None:
        pytest.fail(f"{what or repr(measure)} still changing after {timeout} s: "
                    f"{[v for _, v in samples]}")
    return settled


def importable_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with ``tests/`` first on PYTHONPATH, so that a child
    process, and the nbdist workers it starts, can ``from polling import until``."""
    base = dict(os.environ if env is None else env)
    rest = base.get("PYTHONPATH")
    base["PYTHONPATH"] = TESTS_DIR + (os.pathsep + rest if rest else "")
    return base


def assert_ray_session_gone(session_dir: str, what: str, timeout: float = 30.0) -> None:
    """Every process of the Ray session at ``session_dir`` ends within ``timeout``; any left
    then is killed (so one failure does not leak into later tests) and the assertion names it
    as having outlived ``what``."""
    import signal

    from nbdist.backends.ray.guard import session_pids

    if not session_dir:
        return
    session_dir = os.path.realpath(session_dir)
    until(lambda: not session_pids(session_dir, {os.getpid()}), timeout=timeout, interval=0.1)
    left = session_pids(session_dir, {os.getpid()})
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes {sorted(left)} of Ray session {session_dir} outlived {what}"

"""The waits of tests/polling.py: what they return, and how they fail."""

from __future__ import annotations

import itertools

import pytest
from polling import importable_env, poll, poll_settled, retrying, until


def test_poll_returns_the_first_truthy_value() -> None:
    counter = itertools.count()
    assert poll(lambda: next(counter) >= 3 and "ready", timeout=10, interval=0) == "ready"


def test_poll_names_what_never_happened_and_the_last_value() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"waiting for: the gate \(last value: \[\]\)"):
        poll(lambda: [], timeout=0.05, what="the gate")


def test_until_gives_the_last_value_instead_of_failing() -> None:
    assert until(lambda: 0, timeout=0.05) == 0


def test_retrying_returns_once_the_error_stops_and_reraises_the_last_one() -> None:
    attempts = itertools.count()

    def flaky() -> int:
        n = next(attempts)
        if n < 2:
            raise ConnectionError(f"attempt {n}")
        return n

    assert retrying(flaky, on=ConnectionError, timeout=10, interval=0) == 2

    def always() -> None:
        raise ConnectionError("still restarting")

    with pytest.raises(ConnectionError, match="still restarting"):
        retrying(always, on=ConnectionError, timeout=0.05, interval=0)


def test_poll_settled_waits_until_the_figures_stop_moving() -> None:
    readings = iter([100, 50, 20, 10, 10.5])

    def measure() -> list[float]:
        return [next(readings, 10.0)]

    assert poll_settled(measure, tolerance=1.0, quiet=0.2, timeout=10, interval=0.01) == (10.0,)
    assert next(readings, None) is None  # every falling reading was seen before it settled


def test_poll_settled_fails_while_the_figures_keep_moving() -> None:
    counter = itertools.count()
    with pytest.raises(pytest.fail.Exception, match="still changing"):
        poll_settled(lambda: [next(counter)], tolerance=0.5, quiet=0.05, timeout=0.3,
                     interval=0.01)


def test_importable_env_puts_the_tests_folder_first() -> None:
    env = importable_env({"PYTHONPATH": "/elsewhere"})
    first, rest = env["PYTHONPATH"].split(":", 1)
    assert first.endswith("/tests") and rest == "/elsewhere"

"""Waiting for a condition in tests: the one polling loop (``poll``) every test folder uses.

Importable as ``from polling import poll``: pytest puts ``tests/`` on ``sys.path`` for the
conftest there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest


def poll(
    predicate: Callable[[], Any], *, timeout: float = 10.0, interval: float = 0.02, what: str = ""
) -> Any:
    """Return the first truthy value of ``predicate()``; fail the test after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for: {what or predicate!r}")
        time.sleep(interval)

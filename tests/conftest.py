"""Helpers shared by every test directory.

Tests wait for conditions, never for fixed times: ``wait_until`` polls a predicate until it
holds or a deadline passes, and fails with the caller's description of what never happened.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from polling import poll


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "nbdist_only: checks behaviour nbdist promises beyond Ray's core API (event stream, "
        "/dev/shm object files, argument names in serialization errors); deselect with "
        "-m 'not nbdist_only' when running the suite against Ray for comparison",
    )


@pytest.fixture
def wait_until() -> Callable[..., Any]:
    """``wait_until(predicate, timeout=10, what="...")``: poll until truthy, else fail."""
    return poll

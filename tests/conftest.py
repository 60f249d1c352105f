"""Helpers shared by every test directory.

Tests wait for conditions, never for fixed times: ``wait_until`` polls a predicate until it
holds or a deadline passes, and fails with the caller's description of what never happened.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

import pytest
from polling import poll


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("NBDIST_TEST_LANE"):
        # A lane is ended with SIGTERM (a background job ignores SIGINT): end it as an
        # interrupt, so that its fixtures still stop the clusters they started.
        signal.signal(signal.SIGTERM, _interrupt)
    config.addinivalue_line(
        "markers",
        "nbdist_only: checks behaviour nbdist promises beyond Ray's core API (event stream, "
        "/dev/shm object files, argument names in serialization errors); deselect with "
        "-m 'not nbdist_only' when running the suite against Ray for comparison",
    )


def _ray_half(item: pytest.Item) -> bool:
    """A conformance test run against Ray (the ``backend`` fixture's ``"ray"`` parameter)."""
    callspec = getattr(item, "callspec", None)
    return (callspec is not None and callspec.params.get("backend") == "ray"
            and "conformance" in item.path.parts)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``NBDIST_TEST_LANE``: ``ray`` keeps only the conformance suite's Ray half, ``main``
    everything else. `make test` runs the two lanes side by side: the Ray half spends most of
    its time waiting for Ray's processes to start, and it shares nothing with the rest (its own
    Ray cluster, no nbdist node). Unset: one run of everything."""
    lane = os.environ.get("NBDIST_TEST_LANE")
    if lane not in ("main", "ray"):
        return
    keep, drop = [], []
    for item in items:
        (keep if _ray_half(item) == (lane == "ray") else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture
def wait_until() -> Callable[..., Any]:
    """``wait_until(predicate, timeout=10, what="...")``: poll until truthy, else fail."""
    return poll

"""Fixtures for the nbdist.tune tests that run real trials.

``cluster``: one 2-CPU nbdist cluster per module (trials are real actors in real worker
processes), shut down at the end; ``own_cluster`` for a test that starts its own. Test modules are pickled by value, since worker processes
cannot import them. ``storage`` is a fresh ``storage_path`` per test.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import cloudpickle
import pytest

import nbdist


@pytest.fixture(autouse=True, scope="module")
def _pickle_test_module_by_value(request: pytest.FixtureRequest) -> None:
    module = sys.modules.get(request.module.__name__)
    if module is not None:
        cloudpickle.register_pickle_by_value(module)


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    if nbdist.is_initialized():
        nbdist.shutdown()
    nbdist.init(num_cpus=2)
    try:
        yield
    finally:
        nbdist.shutdown()


@pytest.fixture
def own_cluster() -> Iterator[None]:
    """For a test that calls ``init()`` itself: nothing runs before it, all is shut after."""
    if nbdist.is_initialized():
        nbdist.shutdown()
    try:
        yield
    finally:
        nbdist.shutdown()


@pytest.fixture
def storage(tmp_path: Path) -> str:
    return str(tmp_path / "results")

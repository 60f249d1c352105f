"""Fixtures for nbdist.data's tests: one real 2-CPU cluster per module, progress lines off,
and test modules pickled by value (workers cannot import them)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import cloudpickle
import pytest

import nbdist


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    from nbdist.data import DataContext

    if nbdist.is_initialized():
        nbdist.shutdown()
    nbdist.init(num_cpus=2)
    DataContext.get_current().enable_progress_bars = False
    yield
    nbdist.shutdown()


@pytest.fixture(autouse=True, scope="module")
def _pickle_test_module_by_value(request: pytest.FixtureRequest) -> None:
    module = sys.modules.get(request.module.__name__)
    if module is not None:
        cloudpickle.register_pickle_by_value(module)

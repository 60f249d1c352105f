"""Fixtures for the nbdist.rllib tests that run real env runners.

``cluster``: one nbdist cluster per module with 4 logical CPUs (an algorithm's two env runners
take a bundle of 1 CPU each, a Tune trial one more; the machine has 2 cores, the runners mostly
wait on each other), shut down at the end. Test modules are pickled by value, since worker
processes cannot import them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

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
    nbdist.init(num_cpus=4)
    try:
        yield
    finally:
        nbdist.shutdown()

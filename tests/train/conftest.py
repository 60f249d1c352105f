"""Fixtures for nbdist.train's tests: a real 2-CPU cluster per module (trainers start real
worker processes, which every test ends), and a recorder of the run's ``RunUpdate`` events.

Training functions defined in test modules are pickled by value (workers cannot import the
test modules); ``polling`` and ``train_helpers`` too.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import cloudpickle
import polling
import pytest
import train_helpers

import nbdist
from nbdist import events


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    if nbdist.is_initialized():
        nbdist.shutdown()
    nbdist.init(num_cpus=2)
    yield
    nbdist.shutdown()


@pytest.fixture(autouse=True, scope="module")
def _pickle_test_module_by_value(request: pytest.FixtureRequest) -> None:
    module = sys.modules.get(request.module.__name__)
    if module is not None:
        cloudpickle.register_pickle_by_value(module)
    cloudpickle.register_pickle_by_value(polling)
    cloudpickle.register_pickle_by_value(train_helpers)


class RunUpdates:
    """The ``run_update`` records published while the fixture is active."""

    def __init__(self) -> None:
        self.records: list[Any] = []
        self.unsubscribe = events.subscribe(self.records.extend, kinds=["run_update"])

    def of(self, run: str) -> list[Any]:
        return [r for r in self.records if r.library == "train" and r.run == run]


@pytest.fixture
def run_updates() -> Iterator[RunUpdates]:
    recorder = RunUpdates()
    yield recorder
    recorder.unsubscribe()

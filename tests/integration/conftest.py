"""Cluster fixtures for the integration tests (real head, node daemon and worker processes).

Starting a cluster costs real time, so tests that do not disturb one another share one: a
session-wide manager keeps a single running cluster and starts a new one only when a test asks
for a different configuration (``cluster``, ``small_cluster``) or for a cluster of its own
(``fresh_cluster``: fault tests kill processes on purpose). ``no_cluster`` stops whatever runs,
for tests that start and stop runtimes themselves. pytest runs a module's tests in file order,
so grouping tests by fixture keeps restarts rare. A test that fails (or times out) may leave
stuck tasks or dead workers behind, so its cluster is stopped and the next test starts clean:
one failure shows up as one failure, not as a cascade.

Remote functions and classes defined in test modules are pickled by value: the test modules
are imported by pytest from a path worker processes need not have. Importing user modules by
reference in workers is checked on its own, with a script driver, in test_semantics.py.
"""

from __future__ import annotations

import glob
import sys
from collections.abc import Callable, Iterator
from typing import Any

import cloudpickle
import polling
import pytest

import nbdist

# Logical resources: nothing here needs real GPUs or real cores to exist.
SHARED_CONFIG: dict[str, Any] = {"num_cpus": 4, "num_gpus": 1}
SMALL_CONFIG: dict[str, Any] = {"num_cpus": 2, "resources": {"special": 1}}

SHM_GLOB = "/dev/shm/nbdist-*"


class ClusterManager:
    """Owns the one runtime of this pytest process and the configuration it was started with."""

    def __init__(self) -> None:
        self.config: dict[str, Any] | None = None

    def use(self, config: dict[str, Any], *, fresh: bool = False) -> None:
        if not fresh and self.config == config and nbdist.is_initialized():
            return
        self.stop()
        nbdist.init(**config)
        self.config = config

    def stop(self) -> None:
        if nbdist.is_initialized():
            nbdist.shutdown()
        self.config = None


@pytest.fixture(scope="session")
def cluster_manager() -> Iterator[ClusterManager]:
    manager = ClusterManager()
    yield manager
    manager.stop()


_TEST_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call" and report.failed:
        item.stash[_TEST_FAILED] = True
    return report


def _shared(
    request: pytest.FixtureRequest, manager: ClusterManager, config: dict[str, Any]
) -> Iterator[dict[str, Any]]:
    manager.use(config)
    yield config
    if request.node.stash.get(_TEST_FAILED, False):
        manager.stop()


@pytest.fixture
def cluster(
    request: pytest.FixtureRequest, cluster_manager: ClusterManager
) -> Iterator[dict[str, Any]]:
    """The shared cluster: 4 logical CPUs and 1 logical GPU."""
    yield from _shared(request, cluster_manager, SHARED_CONFIG)


@pytest.fixture
def small_cluster(
    request: pytest.FixtureRequest, cluster_manager: ClusterManager
) -> Iterator[dict[str, Any]]:
    """2 CPUs and one unit of a custom resource "special"; no GPUs."""
    yield from _shared(request, cluster_manager, SMALL_CONFIG)


@pytest.fixture
def fresh_cluster(cluster_manager: ClusterManager) -> Iterator[dict[str, Any]]:
    """A 2-CPU cluster of the test's own, stopped afterwards so no damage outlives the test."""
    config = {"num_cpus": 2}
    cluster_manager.use(config, fresh=True)
    yield config
    cluster_manager.stop()


@pytest.fixture
def no_cluster(cluster_manager: ClusterManager) -> Iterator[None]:
    """No runtime in this process before the test; whatever the test started is stopped after."""
    cluster_manager.stop()
    yield
    cluster_manager.stop()


@pytest.fixture(autouse=True, scope="module")
def _pickle_test_module_by_value(request: pytest.FixtureRequest) -> None:
    module = sys.modules.get(request.module.__name__)
    if module is not None:
        cloudpickle.register_pickle_by_value(module)
    # Remote functions wait for their gates with ``polling.until``; workers cannot import it.
    cloudpickle.register_pickle_by_value(polling)


def _shm_files() -> set[str]:
    return set(glob.glob(SHM_GLOB))


@pytest.fixture
def shm_files() -> Callable[[], set[str]]:
    """``shm_files()``: the nbdist shared-memory object files that exist right now."""
    return _shm_files


@pytest.fixture
def cli(tmp_path: Any) -> Iterator[Any]:
    """`nbdist start/stop/status` with a state directory of the test's own; whatever the test
    started is stopped afterwards, also when it fails."""
    from clusters import Cli

    c = Cli(tmp_path / "state")
    try:
        yield c
    finally:
        c.stop_all()

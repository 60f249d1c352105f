"""The conformance suite: the same tests against nbdist's own engine and against Ray.

Every test here runs twice, once per backend: the session-scoped ``backend`` fixture is
parametrized with ``"nbdist"`` and ``"ray"``, so pytest runs every conformance test on one
backend, then every one on the other, and each cluster (2 logical CPUs, one unit of a custom
resource ``special``, no GPUs) starts once per run: Ray starts once, not once per module.
Because that cluster lives in the test process until the end of the session, the conformance
tests are moved to the end of the run (after tests that start their own in-process clusters).

Ray is a test dependency (the ``test`` extra): if it is missing, the Ray half fails with the
error that tells how to install it; nothing is skipped.

After a backend's last test the cluster is shut down and, for Ray, no process of its session
may remain (raylet, GCS, workers, agents); a leftover fails the module's last test teardown.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import cloudpickle
import pytest
from polling import until

import nbdist

CONFIG: dict[str, Any] = {"num_cpus": 2, "resources": {"special": 1}}
BACKENDS = ["nbdist", "ray"]
LEFTOVER_TIMEOUT_S = 30.0

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def _ray_leftovers(session_dir: str) -> set[int]:
    from nbdist.backends.ray.guard import session_pids

    return session_pids(os.path.realpath(session_dir), {os.getpid()})


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # After pytest grouped them by backend: the same order, at the end of the run.
    here = os.path.dirname(os.path.abspath(__file__))
    items.sort(key=lambda item: str(item.path).startswith(here + os.sep))


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """The backend the tests run on, with its cluster started."""
    name: str = request.param
    if nbdist.is_initialized():
        nbdist.shutdown()
    info = nbdist.init(backend=name, **CONFIG)
    try:
        yield name
    finally:
        nbdist.shutdown()
    if name == "ray":
        until(lambda: not _ray_leftovers(info["session_dir"]), timeout=LEFTOVER_TIMEOUT_S,
              interval=0.1)
        left = _ray_leftovers(info["session_dir"])
        for pid in left:
            os.kill(pid, 9)
        assert not left, f"Ray processes {sorted(left)} outlived nbdist.shutdown()"


@pytest.fixture(autouse=True, scope="module")
def _pickle_test_module_by_value(request: pytest.FixtureRequest) -> None:
    """Test modules are not importable in workers: their functions travel by value."""
    module = sys.modules.get(request.module.__name__)
    if module is not None:
        cloudpickle.register_pickle_by_value(module)


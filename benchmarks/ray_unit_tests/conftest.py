"""The fixtures Ray's core unit tests ask for (the names of Ray's ``python/ray/tests/conftest.py``,
written anew on the public API), for a run on Ray 2.60 and a run on nbdist.

``run.py`` loads this file as a pytest plugin (``-p conftest``), so it applies to a folder of
Ray's test files wherever it is. With ``NBDIST_AS_RAY=1``, ``import ray`` is nbdist's
(``nbdist_as_ray``), installed here before any test module is imported; otherwise ``ray`` is
Ray, with the one helper module its wheel leaves out. The fixtures are the same code for both:
they only ``import ray``.

With ``RAY_UNIT_TESTS_LOG`` set, every test's start and outcome is appended there as a JSON
line (the runner reads it, and it survives a run killed part-way).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterator
from typing import Any

import nbdist_as_ray
import pytest

if os.environ.get("NBDIST_AS_RAY") == "1":
    nbdist_as_ray.install()
else:
    nbdist_as_ray.install_ray_extras()

import ray  # noqa: E402  (after the mapping above)

ON_NBDIST = os.environ.get("NBDIST_AS_RAY") == "1"
STARTUP_FAILURES = ("timed out during startup", "Could not start the nbdist cluster")


def _patient(init: Any) -> Any:
    """``init`` that tries again (twice) when the cluster fails to come up in time, as Ray's
    node does on a loaded machine (it gives its raylet 30 s). On Ray, a cluster the test
    starts has no dashboard unless the test asks for one: it starts in time that way."""

    @functools.wraps(init)
    def patient_init(*args: Any, **kwargs: Any) -> Any:
        starting = not args and kwargs.get("address") is None and "RAY_ADDRESS" not in os.environ
        if not ON_NBDIST and starting:
            kwargs.setdefault("include_dashboard", False)
        for attempt in range(3):
            try:
                return init(*args, **kwargs)
            except Exception as error:
                if attempt == 2 or not any(s in str(error) for s in STARTUP_FAILURES):
                    raise
                ray.shutdown()
        return None

    return patient_init


ray.init = _patient(ray.init)


def default_init_kwargs() -> dict[str, Any]:
    """What Ray's fixtures pass to ``init`` unless a test's parameters say otherwise."""
    kwargs: dict[str, Any] = {
        "num_cpus": 1,
        "object_store_memory": 150 * 1024 * 1024,
        "namespace": "default_test_namespace",
    }
    if not ON_NBDIST:  # Ray's own fixture settings for a quick test cluster
        kwargs["_system_config"] = {
            "object_timeout_milliseconds": 200,
            "health_check_initial_delay_ms": 0,
            "health_check_failure_threshold": 10,
            "object_store_full_delay_ms": 100,
            "local_gc_min_interval_s": 1,
        }
    return kwargs


def _params(request: pytest.FixtureRequest) -> dict[str, Any]:
    return dict(getattr(request, "param", None) or {})


def _init(**overrides: Any) -> Any:
    """``ray.init`` with the fixture defaults; a cluster an earlier test left behind is shut
    down first, and one that fails to start (or is cut off by the test's time limit) is shut
    down before the error goes on, so one bad start does not sink the tests after it."""
    kwargs = default_init_kwargs()
    kwargs.update(overrides)
    if ray.is_initialized():
        ray.shutdown()
    try:
        return ray.init(**kwargs)
    except BaseException:
        ray.shutdown()
        raise


def _shutdown() -> None:
    ray.shutdown()


def _cleanup(cluster: Any) -> None:
    ray.shutdown()
    if cluster is not None:
        try:
            cluster.shutdown()
        except Exception:  # a cluster that never came up may not shut down cleanly
            pass


@pytest.fixture
def shutdown_only() -> Iterator[None]:
    yield None
    _shutdown()


@pytest.fixture
def ray_start_regular(request: pytest.FixtureRequest) -> Iterator[Any]:
    info = _init(**_params(request))
    yield info
    _shutdown()


@pytest.fixture(scope="module")
def ray_start_regular_shared(request: pytest.FixtureRequest) -> Iterator[Any]:
    info = _init(**_params(request))
    yield info
    _shutdown()


@pytest.fixture(scope="module")
def ray_start_shared_local_modes(request: pytest.FixtureRequest) -> Iterator[Any]:
    info = _init(**_params(request))
    yield info
    _shutdown()


@pytest.fixture(scope="module")
def ray_start_regular_shared_2_cpus(request: pytest.FixtureRequest) -> Iterator[Any]:
    info = _init(**{"num_cpus": 2, **_params(request)})
    yield info
    _shutdown()


def _cpus_fixture(num_cpus: int) -> Any:
    @pytest.fixture
    def fixture(request: pytest.FixtureRequest) -> Iterator[Any]:
        info = _init(**{"num_cpus": num_cpus, **_params(request)})
        yield info
        _shutdown()

    return fixture


ray_start_1_cpu = _cpus_fixture(1)
ray_start_2_cpus = _cpus_fixture(2)
ray_start_4_cpus = _cpus_fixture(4)
ray_start_10_cpus = _cpus_fixture(10)


@pytest.fixture
def ray_start_object_store_memory(request: pytest.FixtureRequest) -> Iterator[Any]:
    info = _init(num_cpus=1, object_store_memory=request.param)
    yield info
    _shutdown()


@pytest.fixture
def ray_start_cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A ``cluster_utils.Cluster``; with ``num_nodes`` in the parameters, that many nodes and
    the driver connected to the first (``do_init`` to say otherwise)."""
    from ray.cluster_utils import Cluster

    params = _params(request)
    num_nodes = params.pop("num_nodes", 0)
    do_init = params.pop("do_init", num_nodes > 0)
    node_kwargs = default_init_kwargs()
    node_kwargs.pop("namespace", None)
    node_kwargs.update(params)
    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster()
    try:
        for index in range(num_nodes):
            if index > 0:
                node_kwargs.pop("_system_config", None)
            cluster.add_node(**node_kwargs)
            if index == 0 and do_init:
                ray.init(address=cluster.address)
    except BaseException:
        _cleanup(cluster)
        raise
    yield cluster
    _shutdown()
    cluster.shutdown()


@pytest.fixture
def ray_start_cluster_enabled(ray_start_cluster: Any) -> Iterator[Any]:
    yield ray_start_cluster


@pytest.fixture
def ray_start_cluster_init(request: pytest.FixtureRequest) -> Iterator[Any]:
    from ray.cluster_utils import Cluster

    cluster = Cluster()
    node_kwargs = default_init_kwargs()
    node_kwargs.pop("namespace", None)
    node_kwargs.update(_params(request))
    try:
        cluster.add_node(**node_kwargs)
        ray.init(address=cluster.address)
    except BaseException:
        _cleanup(cluster)
        raise
    yield cluster
    _shutdown()
    cluster.shutdown()


@pytest.fixture
def ray_start_cluster_head(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A ``Cluster`` with a head node (the parameters are its options), the driver on it."""
    from ray.cluster_utils import Cluster

    head_args = default_init_kwargs()
    head_args.pop("namespace", None)
    head_args.update(_params(request))
    if ray.is_initialized():
        ray.shutdown()
    cluster = None
    try:
        cluster = Cluster(initialize_head=True, connect=True, head_node_args=head_args)
    except BaseException:
        _cleanup(cluster)
        raise
    yield cluster
    _shutdown()
    cluster.shutdown()


@pytest.fixture
def error_pubsub() -> Iterator[Any]:
    """Ray's subscription to the errors its workers push (Ray's GCS pubsub)."""
    from ray._private.test_utils import init_error_pubsub

    subscriber = init_error_pubsub()
    yield subscriber
    subscriber.close()


# ---------------------------------------------------------------------------- outcome log
def _log(record: dict[str, Any]) -> None:
    path = os.environ.get("RAY_UNIT_TESTS_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")


def _reason(report: Any) -> str:
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    if crash is not None:
        return str(crash.message).strip().splitlines()[0][:300] if crash.message else ""
    text = str(report.longrepr or "").strip().splitlines()
    return text[-1][:300] if text else ""


def pytest_collection_finish(session: pytest.Session) -> None:
    _log({"event": "collected", "nodeids": [item.nodeid for item in session.items]})


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _log({"event": "collect_error", "nodeid": report.nodeid, "reason": _reason(report)})


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    _log({"event": "start", "nodeid": nodeid})


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    record = {
        "event": "report",
        "nodeid": report.nodeid,
        "when": report.when,
        "outcome": report.outcome,
        "duration": round(report.duration, 2),
    }
    if hasattr(report, "wasxfail"):
        record["xfail"] = True
    if report.failed:
        record["reason"] = _reason(report)
    _log(record)

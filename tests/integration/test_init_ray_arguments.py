"""``init()`` takes the Ray arguments that configure servers nbdist does not run (dashboard,
Prometheus metrics export), so a Ray script passing them starts a working cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import nbdist

pytestmark = pytest.mark.timeout(120)


@nbdist.remote
def double(x):
    return 2 * x


@pytest.fixture
def clean_runtime(no_cluster) -> Iterator[None]:
    assert not nbdist.is_initialized()
    yield


@pytest.mark.usefixtures("clean_runtime")
def test_init_with_a_metrics_export_port_starts_a_cluster() -> None:
    nbdist.init(num_cpus=1, _metrics_export_port=8080, include_dashboard=False)
    assert nbdist.get(double.remote(21)) == 42

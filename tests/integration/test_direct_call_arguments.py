"""Large arguments of direct actor calls under memory pressure.

A driver's call to an actor on its node goes straight to the actor's worker, while the large
argument the driver put into shared memory is announced to the node on another connection. The
worker asks the node for that argument; the node must wait for the announcement rather than
report the argument gone. Ray's documentation runs this pattern (``limit_tasks.py``: many
in-flight calls, each with an 8 MB array) and expects every call to succeed.
"""

from __future__ import annotations

import numpy as np
import pytest

import nbdist

pytestmark = [pytest.mark.timeout(120), pytest.mark.nbdist_only, pytest.mark.usefixtures(
    "no_cluster")]

MiB = 1 << 20


@nbdist.remote
class Summer:
    def total(self, values: np.ndarray) -> float:
        return float(values.sum())


def test_many_in_flight_calls_with_large_arguments_all_get_their_argument() -> None:
    nbdist.init(num_cpus=2, object_store_memory=32 * MiB)
    summer = Summer.remote()
    nbdist.get(summer.total.remote(np.ones(4)))  # later calls go over the direct link
    in_flight: list = []
    results: list[float] = []
    for i in range(2000):
        if len(in_flight) > 100:
            done, in_flight = nbdist.wait(in_flight, num_returns=len(in_flight) - 100)
            results += nbdist.get(done)
        in_flight.append(summer.total.remote(np.full(256 * 1024, i, dtype=np.float64)))
    results += nbdist.get(in_flight)
    assert sorted(results) == [float(i * 256 * 1024) for i in range(2000)]

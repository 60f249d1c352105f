"""nbdist.util.collective on both backends: it uses only nbdist's public API (a named
coordinator actor, actor calls), so a group forms and computes the same on Ray."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import nbdist
from nbdist.util import collective as col

pytestmark = pytest.mark.timeout(180)


@nbdist.remote(num_cpus=0)
class Member:
    def join(self, rank: int) -> int:
        col.init_collective_group(2, rank, group_name="conformance")
        return col.get_collective_group_size("conformance")

    def allreduce_and_broadcast(self, rank: int) -> tuple[list[float], list[int]]:
        x = np.arange(5, dtype=np.float64) * (rank + 1)
        col.allreduce(x, "conformance")
        b = np.full(3, rank)
        col.broadcast(b, src_rank=1, group_name="conformance")
        col.destroy_collective_group("conformance")
        return x.tolist(), b.tolist()

    def declared(self) -> tuple[int, list[int]]:
        x = np.array([1, 7])
        col.allreduce(x, "declared", op=col.ReduceOp.PRODUCT)  # joins the group first
        return col.get_rank("declared"), x.tolist()


def test_a_group_of_actors_allreduces_on_either_backend(backend: str) -> None:
    members = [Member.remote() for _ in range(2)]
    try:
        assert nbdist.get([m.join.remote(r) for r, m in enumerate(members)], timeout=120) == [2, 2]
        results: list[Any] = nbdist.get(
            [m.allreduce_and_broadcast.remote(r) for r, m in enumerate(members)], timeout=120)
        assert results == [([0.0, 3.0, 6.0, 9.0, 12.0], [1, 1, 1])] * 2
    finally:
        for m in members:
            nbdist.kill(m)


def test_a_group_declared_by_the_driver_forms_on_either_backend(backend: str) -> None:
    members = [Member.remote() for _ in range(2)]
    col.create_collective_group(members, 2, [1, 0], group_name="declared")
    try:
        results = nbdist.get([m.declared.remote() for m in members], timeout=120)
        assert results == [(1, [1, 49]), (0, [1, 49])]
    finally:
        col.destroy_collective_group("declared")
        for m in members:
            nbdist.kill(m)

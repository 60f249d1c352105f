"""Fractional GPUs end to end (Ray's ``gpus.py`` and ``fraction-gpus.py``): actors that each
ask for a quarter of the cluster's one (logical) GPU all run at once and all see that GPU."""

from __future__ import annotations

import os

import pytest

import nbdist

pytestmark = pytest.mark.timeout(60)


@nbdist.remote(num_gpus=0.25)
class Quarter:
    def gpus(self) -> tuple[list[int], str | None]:
        return nbdist.get_gpu_ids(), os.environ.get("CUDA_VISIBLE_DEVICES")


def test_four_quarter_gpu_actors_share_the_one_gpu(cluster) -> None:
    quarters = [Quarter.remote() for _ in range(4)]
    assert nbdist.get([q.gpus.remote() for q in quarters], timeout=30) == [([0], "0")] * 4

"""Fractional GPU requests (``num_gpus < 1``) on a node: they pack onto a GPU they share, as
Ray's do, and each is told which GPU it got; a GPU is whole again when its sharers are gone."""

from __future__ import annotations

from nbdist.scheduler.placement import Placement


class _IO:
    def resources_changed(self) -> None:
        pass


def _placement(gpus: int) -> Placement:
    return Placement(_IO(), 0, {"CPU": 8.0, "GPU": float(gpus)},  # type: ignore[arg-type]
                     list(range(gpus)), lambda oid: None)


HALF = (("GPU", 0.5),)
WHOLE = (("GPU", 1.0),)


def test_halves_pack_two_to_a_gpu() -> None:
    placement = _placement(3)
    assert [placement.acquire(HALF) for _ in range(4)] == [[0], [0], [1], [1]]
    assert placement.acquire(WHOLE) == [2]


def test_quarters_of_one_gpu_all_get_it() -> None:
    placement = _placement(1)
    assert [placement.acquire((("GPU", 0.25),)) for _ in range(4)] == [[0]] * 4


def test_a_shared_gpu_is_whole_again_once_its_sharers_release_it() -> None:
    placement = _placement(2)
    assert placement.acquire(HALF) == [0]
    assert placement.acquire(WHOLE) == [1]
    assert placement.acquire(HALF) == [0]  # the other half of GPU 0
    placement.release(HALF, [0])
    placement.release(HALF, [0])
    placement.release(WHOLE, [1])
    assert sorted(placement.acquire((("GPU", 2.0),))) == [0, 1]

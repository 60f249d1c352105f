"""The collective algorithms as pure functions: chunking, the ring's schedule and its reduction
order, run in memory for every rank at once (no processes, no sockets)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from nbdist.util.collective import ReduceOp
from nbdist.util.collective.algorithms import (
    chunk_bounds,
    fold,
    ring_plan,
    ring_reduction_order,
    simulate_ring,
    ufunc,
)

WORLDS = [1, 2, 3, 4, 5]
OPS = list(ReduceOp)
SIZES = [0, 1, 2, 7, 10, 64, 1001]


def _inputs(world: int, size: int, dtype: str, op: ReduceOp, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed + world * 1000 + size)
    if np.dtype(dtype).kind == "f":
        # Values whose sums depend on the order of addition, to tell orders apart.
        arrays = [(rng.standard_normal(size) * 10.0 ** rng.integers(-8, 8, size)) for _ in
                  range(world)]
    elif op is ReduceOp.PRODUCT:
        arrays = [rng.integers(-3, 4, size) for _ in range(world)]
    else:
        arrays = [rng.integers(-1000, 1000, size) for _ in range(world)]
    return [a.astype(dtype) for a in arrays]


def _reference(inputs: list[np.ndarray], op: ReduceOp) -> np.ndarray:
    """Each chunk folded in the ring's documented order, left to right."""
    world, out = len(inputs), np.empty_like(inputs[0])
    for c, (lo, hi) in enumerate(chunk_bounds(inputs[0].size, world)):
        order = [inputs[r][lo:hi] for r in ring_reduction_order(c, world)]
        out[lo:hi] = functools.reduce(lambda a, b: ufunc(op)(a, b), order)
    return out


@pytest.mark.parametrize("size", [0, 1, 4, 5, 7, 11, 100])
@pytest.mark.parametrize("world", WORLDS)
def test_chunks_cover_the_tensor_in_order_with_sizes_differing_by_at_most_one(
        world: int, size: int) -> None:
    bounds = chunk_bounds(size, world)
    assert len(bounds) == world
    assert bounds[0][0] == 0 and bounds[-1][1] == size
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:], strict=False))
    lengths = [hi - lo for lo, hi in bounds]
    assert max(lengths) - min(lengths) <= 1 and lengths == sorted(lengths, reverse=True)


@pytest.mark.parametrize("world", WORLDS)
def test_each_rank_sends_to_its_successor_what_that_rank_expects(world: int) -> None:
    bounds = chunk_bounds(17, world)
    plans = [list(ring_plan(r, world, bounds)) for r in range(world)]
    assert all(len(p) == 2 * (world - 1) for p in plans)
    for r in range(world):
        for mine, successors in zip(plans[r], plans[(r + 1) % world], strict=True):
            assert mine.send == successors.recv


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32", "uint8"])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("world", WORLDS)
def test_ring_allreduce_gives_every_rank_the_exact_reduction(world: int, op: ReduceOp,
                                                             dtype: str) -> None:
    for size in SIZES:
        inputs = _inputs(world, size, dtype, op)
        buffers = [a.copy() for a in inputs]
        simulate_ring(buffers, op)
        expected = _reference(inputs, op)
        for r, buf in enumerate(buffers):
            np.testing.assert_array_equal(buf, expected, err_msg=f"rank {r}, size {size}")
        if np.dtype(dtype).kind != "f":  # integers: the same as numpy's own reduction
            whole = functools.reduce(lambda a, b: ufunc(op)(a, b), inputs)
            np.testing.assert_array_equal(buffers[0], whole.astype(dtype))


@pytest.mark.parametrize("world", [3, 4, 5])  # with 2 ranks a sum has a single order
def test_float_replicas_are_bit_identical_though_the_fold_order_differs_per_chunk(
        world: int) -> None:
    inputs = _inputs(world, 1001, "float64", ReduceOp.SUM, seed=3)
    buffers = [a.copy() for a in inputs]
    simulate_ring(buffers, ReduceOp.SUM)
    assert all(buf.tobytes() == buffers[0].tobytes() for buf in buffers)
    # The order matters for these values: a plain left fold from rank 0 differs somewhere,
    # so the reference above really pins the ring's order.
    plain = functools.reduce(np.add, inputs)
    assert not np.array_equal(plain, buffers[0])


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("world", WORLDS)
def test_ring_reduce_scatter_leaves_rank_r_with_block_r_reduced(world: int, op: ReduceOp
                                                                ) -> None:
    block = 3
    inputs = _inputs(world, block * world, "int64", op, seed=5)
    buffers = [a.copy() for a in inputs]
    bounds = [(r * block, (r + 1) * block) for r in range(world)]
    plans = {r: list(ring_plan(r, world, bounds, allgather=False)) for r in range(world)}
    assert all(len(p) == world - 1 for p in plans.values())
    simulate_ring(buffers, op, allgather=False)
    whole = functools.reduce(lambda a, b: ufunc(op)(a, b), inputs)
    for r in range(world):
        lo, hi = bounds[r]
        np.testing.assert_array_equal(buffers[r][lo:hi], whole[lo:hi])


@pytest.mark.parametrize("world", WORLDS)
def test_ring_allgather_gives_every_rank_every_block(world: int) -> None:
    buffers = [np.full(world * 2, -1) for _ in range(world)]
    for r, buf in enumerate(buffers):
        buf[2 * r:2 * r + 2] = [r, 10 * r]
    simulate_ring(buffers, ReduceOp.SUM, reduce_scatter=False)
    expected = np.array([v for r in range(world) for v in (r, 10 * r)])
    for buf in buffers:
        np.testing.assert_array_equal(buf, expected)


@pytest.mark.parametrize("op", OPS)
def test_shared_memory_fold_goes_in_rank_order(op: ReduceOp) -> None:
    inputs = _inputs(4, 50, "float32", op, seed=9)
    out = np.empty_like(inputs[0])
    fold(op, inputs, out)
    expected = functools.reduce(lambda a, b: ufunc(op)(a, b), inputs)
    np.testing.assert_array_equal(out, expected)


def test_an_unknown_op_is_refused() -> None:
    with pytest.raises(TypeError, match="ReduceOp"):
        ufunc("sum")  # type: ignore[arg-type]

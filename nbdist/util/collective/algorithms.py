"""The collective algorithms as pure functions over numpy arrays: no sockets, no processes.

A tensor of ``n`` elements is cut into ``world`` contiguous chunks; the first ``n % world``
chunks hold one element more (`chunk_bounds`), so any size works, including sizes smaller than
the world.

Ring allreduce (Horovod's algorithm, bandwidth-optimal: each rank sends ``2 (w-1)/w`` of the
tensor whatever the world size) is a reduce-scatter then an allgather, each ``w - 1`` steps in
which rank ``r`` sends one chunk to rank ``r + 1`` and receives one from rank ``r - 1``:

- reduce-scatter step ``s``: send chunk ``r - s - 1``, receive chunk ``r - s - 2`` and fold it
  into the local one. After the last step rank ``r`` holds chunk ``r`` reduced over all ranks,
  folded in the order ``r + 1, r + 2, ..., r`` (`ring_reduction_order`).
- allgather step ``s``: send chunk ``r - s``, receive chunk ``r - s - 1`` in place.

Every chunk is reduced exactly once, by one chain of ranks, and then copied everywhere, so all
ranks end with bit-identical values (replicas of a model stay equal) even for floats, where
the fold order changes the last bits. `ring_plan` yields these steps for one rank; the socket
transport executes them and `simulate_ring` runs every rank's plan in lockstep in memory,
which is how the unit tests check the chunking and the order.

The shared-memory transport reduces each chunk by reading every rank's copy directly, folding
in rank order ``0, 1, ..., w - 1`` (`fold`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from .types import ReduceOp

Ufunc = Callable[..., np.ndarray]

_UFUNCS: dict[ReduceOp, Ufunc] = {
    ReduceOp.SUM: np.add,
    ReduceOp.PRODUCT: np.multiply,
    ReduceOp.MIN: np.minimum,
    ReduceOp.MAX: np.maximum,
}


def ufunc(op: ReduceOp) -> Ufunc:
    if not isinstance(op, ReduceOp):
        raise TypeError(f"op must be a ReduceOp (SUM, PRODUCT, MIN or MAX), not {op!r}.")
    return _UFUNCS[op]


def chunk_bounds(n: int, world: int) -> list[tuple[int, int]]:
    """``world`` contiguous (start, stop) ranges covering ``range(n)``, sizes differing by at
    most one, the larger ones first."""
    base, extra = divmod(n, world)
    bounds, start = [], 0
    for i in range(world):
        stop = start + base + (1 if i < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def ring_reduction_order(chunk: int, world: int) -> list[int]:
    """The ranks whose values of ``chunk`` the ring folds together, first to last."""
    return [(chunk + 1 + k) % world for k in range(world)]


def fold(op: ReduceOp, sources: Sequence[np.ndarray], out: np.ndarray) -> None:
    """``out = sources[0] op sources[1] op ...``, left to right (``out`` may be one of the
    first two sources, not a later one)."""
    f = ufunc(op)
    if len(sources) == 1:
        np.copyto(out, sources[0])
        return
    f(sources[0], sources[1], out=out)  # the first pair straight into out: one pass less
    for src in sources[2:]:
        f(out, src, out=out)


@dataclass(frozen=True)
class Step:
    """One ring step of one rank: send elements ``send`` to the next rank, receive elements
    ``recv`` from the previous one, and fold them into the local ones if ``reduce`` (the
    received values first), else overwrite the local ones."""

    send: tuple[int, int]
    recv: tuple[int, int]
    reduce: bool


def ring_plan(rank: int, world: int, bounds: Sequence[tuple[int, int]], *,
              reduce_scatter: bool = True, allgather: bool = True) -> Iterator[Step]:
    """The steps of rank ``rank``: a reduce-scatter (rank ``r`` ends holding chunk ``r``
    reduced) and/or an allgather (every rank ends with every chunk, chunk ``r`` coming from
    rank ``r``)."""
    if reduce_scatter:
        for s in range(world - 1):
            yield Step(bounds[(rank - s - 1) % world], bounds[(rank - s - 2) % world], True)
    if allgather:
        for s in range(world - 1):
            yield Step(bounds[(rank - s) % world], bounds[(rank - s - 1) % world], False)


def receive(op: ReduceOp, local: np.ndarray, step: Step, received: np.ndarray) -> None:
    """Apply what one step received to the flat local buffer."""
    view = local[step.recv[0]:step.recv[1]]
    if step.reduce:
        ufunc(op)(received, view, out=view)
    else:
        np.copyto(view, received)


def simulate_ring(buffers: Sequence[np.ndarray], op: ReduceOp = ReduceOp.SUM, *,
                  reduce_scatter: bool = True, allgather: bool = True) -> None:
    """Run every rank's `ring_plan` in lockstep over flat ``buffers`` (one per rank, in
    place), as the socket transport would, but in memory."""
    world = len(buffers)
    bounds = chunk_bounds(buffers[0].size, world)
    plans = [list(ring_plan(r, world, bounds, reduce_scatter=reduce_scatter,
                            allgather=allgather)) for r in range(world)]
    for s in range(len(plans[0])):
        sent = [buffers[r][slice(*plans[r][s].send)].copy() for r in range(world)]
        for r in range(world):
            receive(op, buffers[r], plans[r][s], sent[(r - 1) % world])

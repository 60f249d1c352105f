"""The collective operations of one `Group`, on both transports.

Each function turns its tensors into flat views first; an argument that is invalid on this
rank (wrong list length, wrong dtype, a root out of range) does not raise at once but travels
in the operation's description, so that every rank raises the same error together instead of
the valid ones waiting for this one.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import algorithms
from .algorithms import ReduceOp
from .group import Group, describe, flat_list
from .tensors import Flat, flat
from .transport import DATA
from .types import CollectiveError, CollectiveMismatchError


def _prepare(op: str, build: Callable[[], tuple[dict[str, Any], Any]]) -> tuple[dict[str, Any],
                                                                                 Any]:
    try:
        return build()
    except (CollectiveError, TypeError, ValueError) as exc:
        return {"op": op, "error": str(exc)}, None


def _root(group: Group, root: int, what: str) -> int:
    if isinstance(root, bool) or not isinstance(root, numbers.Integral) or not (
            0 <= root < group.world):
        raise CollectiveError(f"{what} {root!r} is not a rank of a group of {group.world} "
                              f"(ranks 0..{group.world - 1}).")
    return int(root)  # numpy integers too, as plain ints for the JSON description


def _nbytes(desc: dict[str, Any], flat_: Flat | None, factor: int = 1) -> int:
    return 0 if flat_ is None or "error" in desc else flat_.array.nbytes * factor


def allreduce(group: Group, tensor: Any, op: ReduceOp) -> None:
    def build() -> tuple[dict[str, Any], Flat]:
        x = flat(tensor)
        algorithms.ufunc(op)
        return describe("allreduce", x, reduce=op), x

    desc, t = _prepare("allreduce", build)
    if group.transport == "ring":
        group.run(desc, lambda: group.ring(t.array, op, _chunks(group, t.array)))
    else:
        group.run_shared(desc, _nbytes(desc, t), lambda: _write_for_peers(group, t.array),
                         lambda: _shared_allreduce(group, t.array, op))
    t.commit()


def _chunks(group: Group, arr: np.ndarray) -> list[tuple[int, int]]:
    return algorithms.chunk_bounds(arr.size, group.world)


def _write_own(group: Group, arr: np.ndarray) -> None:
    np.copyto(group.buffer(group.rank, arr.dtype, arr.size), arr)


def _buffers(group: Group, arr: np.ndarray, count: int | None = None) -> list[np.ndarray]:
    n = arr.size if count is None else count
    return [group.buffer(r, arr.dtype, n) for r in range(group.world)]


def _write_for_peers(group: Group, arr: np.ndarray) -> None:
    # Only the chunks other ranks reduce: this rank reads its own chunk from ``arr``.
    own = group.buffer(group.rank, arr.dtype, arr.size)
    for r, (lo, hi) in enumerate(_chunks(group, arr)):
        if r != group.rank:
            own[lo:hi] = arr[lo:hi]


def _shared_allreduce(group: Group, arr: np.ndarray, op: ReduceOp) -> None:
    views, bounds = _buffers(group, arr), _chunks(group, arr)
    lo, hi = bounds[group.rank]
    sources = [arr[lo:hi] if r == group.rank else v[lo:hi] for r, v in enumerate(views)]
    algorithms.fold(op, sources, views[group.rank][lo:hi])  # published for the others
    arr[lo:hi] = views[group.rank][lo:hi]
    group.exchange({"reduced": True})
    for r, (lo, hi) in enumerate(bounds):
        if r != group.rank:
            arr[lo:hi] = views[r][lo:hi]


def reduce(group: Group, tensor: Any, dst_rank: int, op: ReduceOp) -> None:
    def build() -> tuple[dict[str, Any], Flat]:
        x = flat(tensor)
        algorithms.ufunc(op)
        return describe("reduce", x, root=_root(group, dst_rank, "dst_rank"), reduce=op), x

    desc, t = _prepare("reduce", build)

    def ring() -> None:
        work = t.array.copy()
        group.ring(work, op, _chunks(group, work))
        if group.rank == dst_rank:
            t.array[:] = work

    def then() -> None:
        if group.rank == dst_rank:
            algorithms.fold(op, _buffers(group, t.array), t.array)

    if group.transport == "ring":
        group.run(desc, ring)
    else:
        group.run_shared(desc, _nbytes(desc, t), lambda: _write_own(group, t.array), then)
    if group.rank == dst_rank:
        t.commit()


def broadcast(group: Group, tensor: Any, src_rank: int) -> None:
    def build() -> tuple[dict[str, Any], Flat]:
        x = flat(tensor)
        return describe("broadcast", x, root=_root(group, src_rank, "src_rank")), x

    desc, t = _prepare("broadcast", build)

    def ring() -> None:
        if group.rank == src_rank:
            for link in group.links.values():
                link.post(DATA, {}, t.array)
            for link in group.links.values():
                link.wait_sent()
        else:
            link = group.links[src_rank]
            _, size, _ = link.recv_header()
            link.recv_payload(t.array, size)

    def write() -> None:
        if group.rank == src_rank:
            _write_own(group, t.array)

    def then() -> None:
        if group.rank != src_rank:
            np.copyto(t.array, group.buffer(src_rank, t.dtype, t.array.size))

    if group.transport == "ring":
        group.run(desc, ring)
    else:
        group.run_shared(desc, _nbytes(desc, t), write, then)
    t.commit()


def allgather(group: Group, tensor_list: Sequence[Any], tensor: Any) -> None:
    def build() -> tuple[dict[str, Any], Any]:
        x, outs = flat(tensor), flat_list(tensor_list, group.world, "tensor_list")
        _same_as(x, outs, "tensor_list")
        return describe("allgather", x), (x, outs)

    desc, parts = _prepare("allgather", build)
    x, outs = parts if parts is not None else (None, [])

    def deliver(sources: list[np.ndarray]) -> None:
        for out, src in zip(outs, sources, strict=True):
            np.copyto(out.array, src)
            out.commit()

    def ring() -> None:
        n = x.array.size
        work = np.empty(n * group.world, dtype=x.dtype)
        work[group.rank * n:(group.rank + 1) * n] = x.array
        bounds = [(r * n, (r + 1) * n) for r in range(group.world)]
        group.ring(work, ReduceOp.SUM, bounds, reduce_scatter=False)
        deliver([work[lo:hi] for lo, hi in bounds])

    if group.transport == "ring":
        group.run(desc, ring)
    else:
        group.run_shared(desc, _nbytes(desc, x), lambda: _write_own(group, x.array),
                         lambda: deliver(_buffers(group, x.array)))


def reducescatter(group: Group, tensor: Any, tensor_list: Sequence[Any], op: ReduceOp) -> None:
    def build() -> tuple[dict[str, Any], Any]:
        x, ins = flat(tensor), flat_list(tensor_list, group.world, "tensor_list")
        _same_as(x, ins, "tensor_list")
        algorithms.ufunc(op)
        return describe("reducescatter", x, reduce=op), (x, ins)

    desc, parts = _prepare("reducescatter", build)
    x, ins = parts if parts is not None else (None, [])
    world, rank = group.world, group.rank

    def blocks() -> list[tuple[int, int]]:
        n = x.array.size
        return [(r * n, (r + 1) * n) for r in range(world)]

    def ring() -> None:
        work = np.concatenate([i.array for i in ins])
        group.ring(work, op, blocks(), allgather=False)
        np.copyto(x.array, work[slice(*blocks()[rank])])

    def write() -> None:
        own = group.buffer(rank, x.dtype, x.array.size * world)
        for (lo, hi), i in zip(blocks(), ins, strict=True):
            own[lo:hi] = i.array

    def then() -> None:
        views = _buffers(group, x.array, x.array.size * world)
        algorithms.fold(op, [v[slice(*blocks()[rank])] for v in views], x.array)

    if group.transport == "ring":
        group.run(desc, ring)
    else:
        group.run_shared(desc, _nbytes(desc, x, world), write, then)
    if x is not None:
        x.commit()


def barrier(group: Group) -> None:
    group.run({"op": "barrier"}, lambda: None)


def _same_as(x: Flat, others: list[Flat], what: str) -> None:
    for i, o in enumerate(others):
        if o.shape != x.shape or o.dtype != x.dtype:
            raise CollectiveError(f"{what}[{i}] has shape {o.shape} and dtype {o.dtype}; the "
                                  f"tensor has shape {x.shape} and dtype {x.dtype}: they must "
                                  f"match.")


def send(group: Group, tensor: Any, dst_rank: int) -> None:
    t = flat(tensor)
    if _root(group, dst_rank, "dst_rank") == group.rank:
        raise CollectiveError("A rank cannot send to itself.")
    link = group.links[dst_rank]
    _guard(group, lambda: link.send(DATA, describe("send", t), t.array))


def recv(group: Group, tensor: Any, src_rank: int) -> None:
    t = flat(tensor)
    if _root(group, src_rank, "src_rank") == group.rank:
        raise CollectiveError("A rank cannot receive from itself.")
    link = group.links[src_rank]
    mine = describe("send", t)
    meta: dict[str, Any] = {}

    def body() -> None:
        _, size, meta_in = link.recv_header()
        meta.update(meta_in)
        if meta_in != mine:
            link.recv_payload(None, size)  # drained: the link stays usable
        else:
            link.recv_payload(t.array, size)

    _guard(group, body)
    if meta != mine:
        raise CollectiveMismatchError(
            f"Rank {src_rank} sent a tensor of shape {tuple(meta.get('shape', ()))} and dtype "
            f"{meta.get('dtype')}; this rank receives into shape {t.shape}, dtype {t.dtype}.")
    t.commit()


def _guard(group: Group, body: Callable[[], None]) -> None:
    group.check_usable()
    try:
        body()
    except CollectiveError as exc:
        group.fail(str(exc))
        raise

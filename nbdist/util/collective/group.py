"""One process's membership of a collective group: the links to the other ranks, the
shared-memory buffers when every rank is on this node, and the collective operations.

Every operation starts with an exchange through rank 0 (each rank sends rank 0 a description
of its call: operation, shape, dtype, root, reduce op, or the reason its arguments are invalid;
rank 0 sends every rank the list). All ranks then check the same list, so they raise the same
`CollectiveMismatchError` together rather than one of them waiting forever; that exchange is
also the barrier that orders one operation after the previous one.

Transports (chosen per group when it forms):

- ``shm``: inputs (the parts other ranks read) are copied into each rank's shared-memory
  buffer, then each rank reads the others' buffers: for allreduce rank ``r`` folds chunk ``r``
  of every rank's input (in rank order) into its own buffer, and every rank then copies every
  chunk (one more exchange orders these reads after those writes). See `Group.run_shared` for why the first
  exchange can also order the reads after the inputs' writes.
- ``ring``: Horovod's ring over the links (see algorithms.py), for ranks on several nodes.

A failure mid-operation (a rank died, a timeout) leaves the data streams in an unknown state,
so the group is marked broken, every peer is told why (ABORT frames) and each later call
raises `PeerLostError` until the group is destroyed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import algorithms, shm
from .algorithms import ReduceOp
from .tensors import Flat, flat
from .transport import DATA, Link
from .types import CollectiveError, CollectiveMismatchError, PeerLostError

log = logging.getLogger(__name__)

MIN_SHM_BYTES = 1 << 20


class Group:
    def __init__(self, name: str, rank: int, world: int, links: dict[int, Link],
                 transport: str) -> None:
        self.name, self.rank, self.world = name, rank, world
        self.links, self.transport = links, transport
        self.broken: str | None = None
        self.capacity = 0  # bytes per half of each rank's shared buffer
        self.half = 0
        self.segments: list[shm.Segment] = []

    # -- plumbing ---------------------------------------------------------------------------

    def exchange(self, meta: dict[str, Any]) -> list[dict[str, Any]]:
        """Every rank's ``meta``, in rank order, on every rank (through rank 0)."""
        if self.world == 1:
            return [meta]
        if self.rank != 0:
            self.links[0].send(DATA, meta)
            return self._receive_meta(self.links[0])["all"]
        metas = [meta] + [self._receive_meta(self.links[r]) for r in range(1, self.world)]
        for r in range(1, self.world):
            self.links[r].send(DATA, {"all": metas})  # small: the socket buffer takes it
        return metas

    @staticmethod
    def _receive_meta(link: Link) -> dict[str, Any]:
        _, size, meta = link.recv_header()
        if size:
            raise PeerLostError(f"Rank {link.peer} sent data where the group expected a "
                                f"control message.")
        return meta

    def run(self, desc: dict[str, Any], body: Callable[[], None]) -> None:
        """Check that every rank made the same call, then run ``body``; a transport failure
        breaks the group (see the module docstring)."""
        self.check_usable()
        metas = self._guarded(self.exchange, desc)
        self._check(metas)
        self._guarded(body)

    def _guarded(self, call: Callable[..., Any], *args: Any) -> Any:
        try:
            return call(*args)
        except BaseException as exc:
            self.fail(f"{type(exc).__name__}: {exc}")
            raise

    def check_usable(self) -> None:
        if self.broken is not None:
            raise PeerLostError(f"Collective group {self.name!r} is broken ({self.broken}); "
                                f"destroy it and create it again.")

    def _check(self, metas: list[dict[str, Any]]) -> None:
        errors = [f"rank {r}: {m['error']}" for r, m in enumerate(metas) if m.get("error")]
        if errors:
            raise CollectiveMismatchError(
                f"Invalid {metas[self.rank]['op']} call in group {self.name!r}: "
                + "; ".join(errors))
        if any(m != metas[0] for m in metas):
            calls = "; ".join(f"rank {r}: {_describe(m)}" for r, m in enumerate(metas))
            raise CollectiveMismatchError(
                f"The ranks of group {self.name!r} made different collective calls ({calls}). "
                f"Every rank must call the same operation, in the same order, with tensors "
                f"of the same shape and dtype.")

    def fail(self, reason: str) -> None:
        if self.broken is None:
            self.broken = reason
            log.warning("collective group %r (rank %d) broken: %s", self.name, self.rank, reason)
            for link in self.links.values():
                link.close(f"rank {self.rank}: {reason}")

    def close(self) -> None:
        for link in self.links.values():
            link.close()
        for seg in self.segments:
            seg.close()
        self.links, self.segments = {}, []

    # -- shared memory ----------------------------------------------------------------------

    def run_shared(self, desc: dict[str, Any], nbytes: int, write: Callable[[], None],
                   then: Callable[[], None]) -> None:
        """An operation on the shared buffers: ``write`` puts this rank's input in its own
        buffer, ``then`` reads the others' once all have written.

        Each buffer has two halves used by turns, so a rank may write its input for this
        operation before the first exchange: the half it writes was last read two operations
        ago, and every rank has finished that one, having entered the previous operation. So
        when the input fits, the first exchange both checks the calls and says "written"."""
        self.check_usable()
        early = "error" not in desc and bool(self.segments) and nbytes <= self.capacity
        if early:
            self._guarded(write)
        self._check(self._guarded(self.exchange, desc))

        def body() -> None:
            if not early:
                self.ensure_capacity(nbytes)
                write()
                self.exchange({"written": True})
            then()
            self.half ^= 1

        self._guarded(body)

    def ensure_capacity(self, nbytes: int) -> None:
        """Grow every rank's buffer to hold ``nbytes`` per half (all ranks call this with the
        same value: the first exchange of the operation checked it)."""
        if self.segments and nbytes <= self.capacity:
            return
        size = max(nbytes, 2 * self.capacity, MIN_SHM_BYTES)
        own = shm.Segment.create(2 * size)
        try:
            names = [m["name"] for m in self.exchange({"name": own.name})]
            mapped = [own if r == self.rank else shm.Segment(n, 2 * size, create=False)
                      for r, n in enumerate(names)]
            self.exchange({"mapped": True})
        finally:
            own.unlink()
        for seg in self.segments:
            seg.close()
        self.segments, self.capacity = mapped, size

    def buffer(self, rank: int, dtype: np.dtype, count: int) -> np.ndarray:
        """The current half of ``rank``'s buffer as ``count`` items of ``dtype``."""
        start = self.half * self.capacity
        return self.segments[rank].array[start:start + count * dtype.itemsize].view(dtype)

    # -- ring ---------------------------------------------------------------------------------

    def ring(self, buf: np.ndarray, op: ReduceOp, bounds: Sequence[tuple[int, int]], *,
             reduce_scatter: bool = True, allgather: bool = True) -> None:
        """Run this rank's ring plan over the flat ``buf`` in place."""
        if self.world == 1:
            return
        right = self.links[(self.rank + 1) % self.world]
        left = self.links[(self.rank - 1) % self.world]
        scratch = np.empty(max(hi - lo for lo, hi in bounds), dtype=buf.dtype)
        for step in algorithms.ring_plan(self.rank, self.world, bounds,
                                         reduce_scatter=reduce_scatter, allgather=allgather):
            right.post(DATA, {}, buf[step.send[0]:step.send[1]])
            count = step.recv[1] - step.recv[0]
            _, size, _ = left.recv_header()
            if size != count * buf.itemsize:
                raise PeerLostError(f"Rank {left.peer} sent {size} bytes in a ring step where "
                                    f"{count * buf.itemsize} were expected.")
            if step.reduce:
                left.recv_payload(scratch[:count], size)
                algorithms.receive(op, buf, step, scratch[:count])
            else:
                left.recv_payload(buf[step.recv[0]:step.recv[1]], size)
            right.wait_sent()


def _describe(meta: dict[str, Any]) -> str:
    details = ", ".join(f"{k}={v}" for k, v in meta.items() if k != "op")
    return f"{meta.get('op')}({details})"


def describe(op: str, tensor: Flat | None, **extra: Any) -> dict[str, Any]:
    desc: dict[str, Any] = {"op": op}
    if tensor is not None:
        desc.update(shape=list(tensor.shape), dtype=str(tensor.dtype))
    desc.update({k: (v.name if isinstance(v, ReduceOp) else v) for k, v in extra.items()})
    return desc


def flat_list(tensors: Sequence[Any], world: int, what: str) -> list[Flat]:
    if not isinstance(tensors, (list, tuple)) or len(tensors) != world:
        raise CollectiveError(f"{what} must be a list of world_size ({world}) tensors.")
    return [flat(t, f"{what}[{i}]") for i, t in enumerate(tensors)]

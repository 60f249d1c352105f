"""``nbdist.util.collective``: collective communication among actors (Ray's
``ray.util.collective``), on numpy arrays and CPU torch tensors, in place.

A group is a fixed set of processes (actors, usually), each with a rank. Every member calls
`init_collective_group(world_size, rank, group_name=...)`, or the driver declares the group
once with `create_collective_group(actors, world_size, ranks, ...)` and the members join on
their first call. Then `allreduce`, `allgather`, `reducescatter`, `broadcast`, `reduce`,
`barrier`, `send` / `recv`, called by every rank in the same order, as with
``torch.distributed``.

Built on nbdist's public API only (a named coordinator actor for the rendezvous, see
coordinator.py), so it runs on ``init(backend="ray")`` too. Data moves outside the object store:

    api.py           the public functions; the table of this process's groups
    coordinator.py   rendezvous through a named actor; per-group secret
    transport.py     authenticated TCP links between ranks (a full mesh), framed messages
    group.py         one membership: checks that ranks agree, failure handling, the ring driver
    ops.py           each operation on the two transports
    shm.py           shared-memory buffers (ranks on one node)
    algorithms.py    chunking, the ring's schedule and reduction order, as pure functions
    tensors.py       numpy / torch tensors as flat writable views
    types.py         ReduceOp, Backend, the error tree

The transport is chosen per group: shared memory when every rank runs on one node, else a ring
(Horovod's reduce-scatter + allgather) over the links.
"""

from __future__ import annotations

from .api import (
    allgather,
    allreduce,
    barrier,
    broadcast,
    create_collective_group,
    destroy_collective_group,
    get_collective_group_size,
    get_rank,
    init_collective_group,
    is_group_initialized,
    recv,
    reduce,
    reducescatter,
    send,
)
from .types import (
    Backend,
    CollectiveError,
    CollectiveMismatchError,
    CollectiveTimeoutError,
    GroupNotInitializedError,
    PeerLostError,
    ReduceOp,
)

__all__ = [
    "Backend",
    "CollectiveError",
    "CollectiveMismatchError",
    "CollectiveTimeoutError",
    "GroupNotInitializedError",
    "PeerLostError",
    "ReduceOp",
    "allgather",
    "allreduce",
    "barrier",
    "broadcast",
    "create_collective_group",
    "destroy_collective_group",
    "get_collective_group_size",
    "get_rank",
    "init_collective_group",
    "is_group_initialized",
    "recv",
    "reduce",
    "reducescatter",
    "send",
]

"""The public functions (Ray's ``ray.util.collective`` names), over the groups this process
belongs to.

A process keeps its groups in a table by name (one `Group` per name); the functions look the
group up, and a group made with `create_collective_group` is joined on its first use here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import nbdist
from nbdist.exceptions import ActorError
from nbdist.util import get_node_ip_address

from . import coordinator, ops, shm, transport
from .group import Group
from .types import Backend, CollectiveError, GroupNotInitializedError, ReduceOp

_groups: dict[str, tuple[Group, Any]] = {}  # name -> (group, its coordinator's handle)
_declared: dict[str, Any] = {}  # coordinators this driver made with create_collective_group
_lock = threading.Lock()
# The coordinator calls are the library's own (`nbdist.events.marks`): views fold them.
_MARK = "collective"


def _check_membership(world_size: int, rank: int) -> None:
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive int, not {world_size!r}.")
    if not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank!r} is out of range for a group of world_size "
                         f"{world_size} (ranks 0..{world_size - 1}).")


def init_collective_group(world_size: int, rank: int, backend: Any = Backend.AUTO,
                          group_name: str = "default", gloo_timeout: int = 30_000) -> None:
    """Join group ``group_name`` as ``rank`` of ``world_size``; returns once all ranks have.

    ``backend``: "auto" (shared memory when every rank is on this node, else the ring),
    "shm", "ring"; "gloo" means "auto". ``gloo_timeout`` (ms, Ray's name) bounds the
    rendezvous and every wait on a peer during an operation.
    """
    _check_membership(world_size, rank)
    backend = Backend.parse(backend)
    with _lock:
        if group_name in _groups:
            raise ValueError(f"Collective group {group_name!r} is already initialized in this "
                             f"process (as rank {_groups[group_name][0].rank}).")
        timeout = gloo_timeout / 1000
        deadline = time.monotonic() + timeout
        while True:
            # A coordinator left by an earlier group of this name may be exiting (its owner
            # is gone): a call that finds it dead looks the name up again.
            coord = _coordinator(group_name, world_size, rank, backend, deadline)
            try:
                group = _form(group_name, world_size, rank, backend, coord, timeout)
                break
            except ActorError:
                if time.monotonic() > deadline:
                    raise
        _groups[group_name] = (group, coord)


def _coordinator(name: str, world_size: int, rank: int, backend: str, deadline: float) -> Any:
    coord = coordinator.lookup(name)
    if coord is None and rank == 0:
        return coordinator.coordinator_class().options(
            name=coordinator.PREFIX + name, get_if_exists=True, library_call=_MARK,
        ).remote(world_size, backend, None)
    return coord if coord is not None else coordinator.find(name, deadline)


def _form(name: str, world_size: int, rank: int, backend: str, coord: Any,
          timeout: float) -> Group:
    host = get_node_ip_address()
    listener = transport.listen(host)
    try:
        info = {"host": host, "port": listener.getsockname()[1], "shm": shm.available(),
                "node": nbdist.get_runtime_context().get_node_id()}
        roster = nbdist.get(coord.register.options(library_call=_MARK).remote(
            rank, world_size, backend, info, timeout),
                            timeout=timeout + 10)
        peers = roster["peers"]
        one_node = all(p["node"] == info["node"] and p["shm"] for p in peers)
        if backend == Backend.SHM and not one_node:
            raise CollectiveError(f"Collective group {name!r} asks for backend 'shm' but its "
                                  f"ranks are on several nodes: use 'auto' or 'ring'.")
        # One rank has nobody to share with: the ring's zero steps are the cheapest path.
        kind = "shm" if backend != Backend.RING and one_node and world_size > 1 else "ring"
        links = transport.connect_mesh(listener, rank, [(p["host"], p["port"]) for p in peers],
                                       bytes.fromhex(roster["uid"]),
                                       bytes.fromhex(roster["secret"]), timeout)
    finally:
        listener.close()
    return Group(name, rank, world_size, links, kind)


def create_collective_group(actors: Sequence[Any], world_size: int, ranks: Sequence[int],
                            backend: Any = Backend.AUTO, group_name: str = "default",
                            gloo_timeout: int = 30_000) -> None:
    """Declare from the driver that ``actors[i]`` is rank ``ranks[i]`` of group
    ``group_name``; each actor joins on its first collective call."""
    if len(actors) != len(ranks) or len(set(ranks)) != len(ranks):
        raise ValueError("actors and ranks must have the same length and ranks must be unique.")
    for rank in ranks:
        _check_membership(world_size, rank)
    if len(ranks) != world_size:
        raise ValueError(f"{len(ranks)} actors for a group of world_size {world_size}.")
    if coordinator.lookup(group_name) is not None:
        raise ValueError(f"Collective group {group_name!r} already exists.")
    members = {_actor_key(a): r for a, r in zip(actors, ranks, strict=True)}
    _declared[group_name] = coordinator.coordinator_class().options(
        name=coordinator.PREFIX + group_name, library_call=_MARK,
    ).remote(world_size, Backend.parse(backend), members, gloo_timeout)


def _actor_key(handle: Any) -> str:
    # The id that get_runtime_context().get_actor_id() reports inside the actor; handles
    # expose it only under this name (as Ray's do).
    actor_id = handle._actor_id
    return f"{actor_id:018x}" if isinstance(actor_id, int) else str(actor_id)


def destroy_collective_group(group_name: str = "default") -> None:
    """Leave the group here (close its links, unmap its buffers); on the driver, also drop
    the declaration made by `create_collective_group`."""
    with _lock:
        entry = _groups.pop(group_name, None)
    if entry is not None:
        entry[0].close()
    declared = _declared.pop(group_name, None)
    if declared is not None:
        nbdist.kill(declared)


def is_group_initialized(group_name: str = "default") -> bool:
    return group_name in _groups


def get_rank(group_name: str = "default") -> int:
    """This process's rank in the group, -1 if it has not joined it."""
    entry = _groups.get(group_name)
    return -1 if entry is None else entry[0].rank


def get_collective_group_size(group_name: str = "default") -> int:
    """The group's world size, -1 if this process has not joined it."""
    entry = _groups.get(group_name)
    return -1 if entry is None else entry[0].world


def _group(name: str) -> Group:
    entry = _groups.get(name)
    if entry is not None:
        return entry[0]
    if nbdist.is_initialized():
        actor_id = nbdist.get_runtime_context().get_actor_id()
        coord = coordinator.lookup(name) if actor_id else None
        place = None if coord is None else nbdist.get(
            coord.declared.options(library_call=_MARK).remote(actor_id))
        if place is not None:
            init_collective_group(place["world_size"], place["rank"], place["backend"], name,
                                  place["timeout_ms"])
            return _groups[name][0]
    raise GroupNotInitializedError(
        f"Collective group {name!r} is not initialized in this process: call "
        f"init_collective_group(world_size, rank, group_name={name!r}) in every member, or "
        f"create_collective_group(actors, ...) from the driver, first.")


def allreduce(tensor: Any, group_name: str = "default", op: ReduceOp = ReduceOp.SUM) -> None:
    """Reduce ``tensor`` over the group; every rank gets the result in place."""
    ops.allreduce(_group(group_name), tensor, op)


def reduce(tensor: Any, dst_rank: int = 0, group_name: str = "default",
           op: ReduceOp = ReduceOp.SUM) -> None:
    """Reduce ``tensor`` over the group into rank ``dst_rank``'s tensor (others unchanged)."""
    ops.reduce(_group(group_name), tensor, dst_rank, op)


def broadcast(tensor: Any, src_rank: int = 0, group_name: str = "default") -> None:
    """Copy rank ``src_rank``'s ``tensor`` into every rank's ``tensor``."""
    ops.broadcast(_group(group_name), tensor, src_rank)


def allgather(tensor_list: list[Any], tensor: Any, group_name: str = "default") -> None:
    """Fill ``tensor_list[r]`` with rank ``r``'s ``tensor``, on every rank."""
    ops.allgather(_group(group_name), tensor_list, tensor)


def reducescatter(tensor: Any, tensor_list: list[Any], group_name: str = "default",
                  op: ReduceOp = ReduceOp.SUM) -> None:
    """Rank ``r``'s ``tensor`` becomes the reduction over ranks of their ``tensor_list[r]``."""
    ops.reducescatter(_group(group_name), tensor, tensor_list, op)


def barrier(group_name: str = "default") -> None:
    """Return once every rank of the group has called barrier."""
    ops.barrier(_group(group_name))


def send(tensor: Any, dst_rank: int, group_name: str = "default") -> None:
    """Send ``tensor`` to rank ``dst_rank`` (which calls `recv`)."""
    ops.send(_group(group_name), tensor, dst_rank)


def recv(tensor: Any, src_rank: int, group_name: str = "default") -> None:
    """Receive into ``tensor`` what rank ``src_rank`` sends."""
    ops.recv(_group(group_name), tensor, src_rank)

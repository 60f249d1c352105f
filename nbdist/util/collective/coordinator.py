"""Rendezvous: the named actor through which the ranks of a group find each other.

The coordinator of group ``g`` is the actor named ``nbdist.collective:g``. It is made either by
rank 0 in `init_collective_group` (the other ranks look it up by name until it exists), or by
the driver in `create_collective_group`, which also records each member actor's rank so that
the members join on their first collective call without calling anything themselves.

Each rank registers (host, port, node id) and waits until the whole group has; all then get
the same roster plus a fresh random group id and secret for authenticating their links (see
transport.py). A round is one formation of the group: a register after the round formed (or
failed) starts a new round (the group is being created again after a destroy or a failure), and
the roster a waiting rank gets is that of the round it joined. A second process registering a
rank the round already has ends the round at once: the ranks waiting in it and the newcomer all
get the same duplicate-rank error, however long their timeout (a user's mistake is never
reported as a timeout on some of the ranks). The secret travels only in actor call results,
i.e. over nbdist's own authenticated transport.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

import nbdist

from .types import CollectiveError, CollectiveTimeoutError

PREFIX = "nbdist.collective:"


class _Round:
    def __init__(self) -> None:
        self.entries: dict[int, dict[str, Any]] = {}
        self.settled = asyncio.Event()  # formed, or ended by an error every waiter raises
        self.error: str | None = None
        self.roster: dict[str, Any] = {"uid": secrets.token_hex(16),
                                       "secret": secrets.token_hex(32), "peers": []}


class Coordinator:
    def __init__(self, world_size: int, backend: str, members: dict[str, int] | None,
                 timeout_ms: int = 30_000) -> None:
        self.world_size, self.backend, self.members = world_size, backend, members
        self.timeout_ms = timeout_ms
        self.round = _Round()

    async def declared(self, actor_key: str) -> dict[str, Any] | None:
        """This actor's place in a group made by `create_collective_group`, if it has one."""
        if self.members is None or actor_key not in self.members:
            return None
        return {"world_size": self.world_size, "rank": self.members[actor_key],
                "backend": self.backend, "timeout_ms": self.timeout_ms}

    async def register(self, rank: int, world_size: int, backend: str, info: dict[str, Any],
                       timeout: float) -> dict[str, Any]:
        if self.members is None and (self.round.settled.is_set() or not self.round.entries):
            # Between formations a group made by init_collective_group may change its shape.
            self.world_size, self.backend = world_size, backend
        if world_size != self.world_size or backend != self.backend:
            raise CollectiveError(
                f"Rank {rank} joins with world_size={world_size}, backend={backend!r}; the "
                f"group was made with world_size={self.world_size}, backend={self.backend!r}.")
        if self.round.settled.is_set():
            self.round = _Round()
        current = self.round
        if rank in current.entries:
            current.error = (f"Two processes joined the group as rank {rank}: every rank must "
                             f"be unique (0..{self.world_size - 1}).")
            current.settled.set()
            raise CollectiveError(current.error)
        current.entries[rank] = info
        if len(current.entries) == self.world_size:
            current.roster["peers"] = [current.entries[r] for r in range(self.world_size)]
            current.settled.set()
        try:
            await asyncio.wait_for(current.settled.wait(), timeout)
        except asyncio.TimeoutError:
            missing = sorted(set(range(self.world_size)) - set(current.entries))
            current.entries.pop(rank, None)
            raise CollectiveTimeoutError(
                f"Ranks {missing} did not join within {timeout:g} s (each member must call "
                f"init_collective_group, or a collective operation for groups made with "
                f"create_collective_group).") from None
        if current.error is not None:
            raise CollectiveError(current.error)
        return current.roster


def coordinator_class() -> Any:
    return nbdist.remote(num_cpus=0)(Coordinator)


def find(name: str, deadline: float) -> Any:
    """The coordinator of group ``name`` once it exists (made by rank 0 or the driver)."""
    while True:
        try:
            return nbdist.get_actor(PREFIX + name)
        except ValueError:
            if time.monotonic() > deadline:
                raise CollectiveTimeoutError(
                    f"The collective group {name!r} has no coordinator: rank 0 did not call "
                    f"init_collective_group in time.") from None
            time.sleep(0.02)


def lookup(name: str) -> Any | None:
    try:
        return nbdist.get_actor(PREFIX + name)
    except ValueError:
        return None

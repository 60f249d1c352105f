"""Worker and actor states and the only moves allowed between them (layer L1).

Every change of `Worker.state` and `Actor.state` goes through their ``to()`` method, which
looks the move up here and raises `IllegalTransition` for any other: a scheduler bug then
fails at the faulty change rather than as a stuck task later. States are plain strings typed
as ``Literal``s (mypy rejects a misspelt one); the check is one dict lookup and a tuple
membership test by identity, cheap enough for the per-task path (a worker goes busy and idle
once per task).

Workers::

    idle ──▶ busy ──▶ idle         a task worker runs one task at a time
    idle ──▶ actor                 a fresh process dedicated to an actor
    idle | busy | actor ──▶ dead   lost (exit, kill) or stopped as an idle extra

Actors (a stand-in for another node's actor is ``remote`` from birth)::

    pending ──▶ alive              its constructor returned
    pending | alive ──▶ restarting its process or its node was lost, restarts remain
    restarting ──▶ pending         started again (here, or on another node)
    any but dead ──▶ dead          killed, out of scope, constructor raised, no restarts left
"""

from __future__ import annotations

from typing import Literal

WorkerState = Literal["idle", "busy", "actor", "dead"]
ActorState = Literal["pending", "alive", "restarting", "remote", "dead"]

WORKER_MOVES: dict[str, tuple[str, ...]] = {
    "idle": ("busy", "actor", "dead"),
    "busy": ("idle", "dead"),
    "actor": ("dead",),
    "dead": (),
}

ACTOR_MOVES: dict[str, tuple[str, ...]] = {
    "pending": ("alive", "restarting", "dead"),
    "alive": ("restarting", "dead"),
    "restarting": ("pending", "dead"),
    "remote": ("dead",),
    "dead": (),
}


class IllegalTransition(AssertionError):
    """A worker or actor was asked to move between states the tables above do not allow:
    a bug in the scheduler, never a user error."""

    def __init__(self, what: str, ident: int, old: str, new: str) -> None:
        super().__init__(f"{what} {ident:x}: {old} -> {new} is not an allowed state change")
        self.old = old
        self.new = new

"""What the scheduler keeps: its clients, workers, tasks, objects and actors, and the NodeIO
interface it drives (layer L1). Plain records with ``__slots__``; the collaborators of
`nbdist.scheduler` own them (see each field's owner there). State changes of workers and
actors go through ``to()``, checked against `states`.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Mapping
from typing import Any, Protocol

from nbdist.scheduler.states import (
    ACTOR_MOVES,
    WORKER_MOVES,
    ActorState,
    IllegalTransition,
    WorkerState,
)
from nbdist.wire import protocol as P

PENDING, READY = 0, 1
CPU_ONLY = (("CPU", 1.0),)
Shape = tuple[tuple[str, float], ...]


class Client:
    """A connected process (driver, worker or peer node) as the scheduler sees it."""

    __slots__ = ("peer", "kind", "client_no", "pid", "holds", "worker", "job", "node_index",
                 "reserved", "grants", "leases")

    def __init__(self, peer: Any, kind: str, client_no: int, pid: int, job: int) -> None:
        self.peer = peer
        self.kind = kind
        self.client_no = client_no
        self.pid = pid
        self.holds: set[int] = set()
        self.worker: Worker | None = None
        self.job = job
        self.node_index = 0  # for a peer node (kind "node"): its index
        self.reserved: dict[int, int] = {}  # store space granted for objects it will write
        self.grants: dict[int, tuple[int, int]] = {}  # oid -> (offset, size) in the arena
        self.leases: dict[int, int] = {}  # arena offset -> locations sent, not given back


class Worker:
    __slots__ = ("pid", "client", "state", "task", "actor", "fns", "blocked", "idle_since",
                 "env", "oom")

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.env = ""  # the key of the runtime_env this process has ("": none)
        self.oom = ""  # why the memory monitor killed it ("": it did not)
        self.client: Client | None = None
        self.state: WorkerState = "idle"
        self.task: Task | None = None
        self.actor: Actor | None = None
        self.fns: set[int] = set()
        self.blocked = False
        self.idle_since = time.monotonic()

    def to(self, new: WorkerState) -> None:
        if new not in WORKER_MOVES[self.state]:
            raise IllegalTransition("worker", self.pid, self.state, new)
        self.state = new


class Task:
    __slots__ = (
        "spec", "id", "owner", "missing", "retries_left", "worker", "held", "gpus",
        "cancelled", "finished", "attempt", "shape", "ready", "dispatched_at", "remote",
        "no_forward",
    )

    def __init__(self, spec: tuple, owner: Client) -> None:
        self.spec = spec
        self.id: int = spec[P.S_TASK_ID]
        self.owner = owner
        self.missing = 0
        self.retries_left: int = spec[P.S_MAX_RETRIES]
        self.worker: Worker | None = None
        self.held: Shape = ()
        self.gpus: list[int] = []
        self.cancelled = False
        self.finished = False
        self.attempt = 0
        res = spec[P.S_RESOURCES]
        self.shape: Shape = CPU_ONLY if res is None else res
        self.ready = False
        self.dispatched_at = 0.0
        self.remote = 0  # index of the node running it for us (0: here)
        self.no_forward = False  # forwarded here by another node: run it here

    @property
    def return_ids(self) -> range:
        return range(self.id + 1, self.id + 1 + self.spec[P.S_NRET])

    @property
    def placement_shape(self) -> Shape:
        """What placing it needs: an actor's constructor asks for the actor's resources, a
        method call for none beyond them (the actor holds them)."""
        return self.shape if not self.spec[P.S_ACTOR] else (self.spec[P.S_RESOURCES] or ())


def producer_of(tasks: Mapping[int, Task], oid: int) -> Task | None:
    """The unfinished task returning ``oid`` (return ids follow their task's id)."""
    for k in range(1, 257):
        task = tasks.get(oid - k)
        if task is not None:
            return task if oid in task.return_ids else None
    return None


class Obj:
    __slots__ = ("state", "blob", "shm_size", "count", "subscribers", "waiting", "contained",
                 "error", "owner_job", "spilled", "used", "offset")

    def __init__(self) -> None:
        self.state = PENDING  # PENDING until its value (or error) is stored, then READY
        self.blob: bytes | None = None
        self.shm_size = 0
        self.count = 0
        self.subscribers: list[Client] = []
        self.waiting: list[Task] = []
        self.contained: tuple[int, ...] = ()
        self.error = False
        self.owner_job = 0
        self.spilled: str | None = None  # its file on disk while it is spilled
        self.used = 0  # when it was last needed (the store's clock): spill the oldest first
        self.offset = -1  # where its shm_size bytes are in the arena; -1: a file (or none)


MANY_CALLERS = object()  # `Actor.caller` once two callers have called it


class Actor:
    __slots__ = ("id", "spec", "state", "worker", "queue", "inflight", "restarts_left",
                 "count", "detached", "killed", "init_error", "name", "namespace", "held",
                 "gpus", "job", "restarts", "remote", "host_for", "creator", "unordered",
                 "caller")

    def __init__(self, spec: tuple, job: int) -> None:
        extra = spec[P.S_EXTRA] or {}
        self.id: int = spec[P.S_ACTOR]
        self.spec = spec
        self.state: ActorState = "pending"
        self.worker: Worker | None = None
        self.queue: collections.deque[Task] = collections.deque()
        self.inflight: dict[int, Task] = {}
        self.restarts_left: int = extra.get("max_restarts", 0)
        self.restarts = 0
        self.count = 0
        self.detached = extra.get("lifetime") == "detached"
        # A concurrent actor (async or threaded) runs calls whose arguments are ready before
        # earlier ones still waiting for theirs; a plain one keeps submission order.
        self.unordered: bool = bool(extra.get("unordered"))
        # The one process (or remote task) that has called it, or MANY_CALLERS once another
        # did: a plain actor keeps the order of each caller's calls, not across callers.
        self.caller: object = None
        self.killed = False
        self.init_error: bytes | None = None
        self.name: str | None = extra.get("name")
        self.namespace: str = extra.get("namespace") or ""
        self.held: Shape = ()
        self.gpus: list[int] = []
        self.job = job
        # The node whose process runs it, when that is another node: for the owner's record
        # of an actor placed there, and for a stand-in (routes calls to the actor's owner).
        self.remote = 0
        self.host_for = 0  # runs here for its owner, node `host_for`
        # The worker (client number) whose task or actor created it: it dies with that
        # process unless detached (fate sharing, as Ray's owner). 0: a driver created it.
        self.creator = 0

    def to(self, new: ActorState) -> None:
        if new not in ACTOR_MOVES[self.state]:
            raise IllegalTransition("actor", self.id, self.state, new)
        self.state = new

    @classmethod
    def stand_in(cls, actor_id: int, index: int) -> Actor:
        """Routes calls to an actor owned by node ``index``, in the order they were made."""
        actor = cls((0, 0, "", b"", (), 0, None, 0, False, actor_id, None, 0, (), 0, None), 0)
        actor.spec = ()
        actor.state = "remote"
        actor.remote = index
        return actor


class NodeIO(Protocol):
    node_id: str
    node_pid: int

    def send(self, client: Client, msg: tuple) -> None: ...
    def spawn_worker(self, actor: bool = False) -> Worker | None: ...
    def kill_worker(self, worker: Worker, graceful: bool = False) -> None: ...
    def unlink(self, oid: int) -> None: ...
    def interrupt_worker(self, worker: Worker) -> None: ...
    def to_head(self, op: str, args: Any) -> None: ...
    def resources_changed(self) -> None: ...
    def forward(self, index: int, spec: tuple, dep_locs: list) -> None: ...
    def spill(self, oid: int, size: int) -> str | None: ...
    def restore(self, oid: int, path: str) -> bool: ...
    def remove_spill(self, path: str) -> None: ...
    # The arena (only called once the table has one, see `ObjectTable.enable_arena`).
    def commit_arena(self, start: int, end: int) -> bool: ...
    def spill_range(self, oid: int, offset: int, size: int) -> str | None: ...
    def restore_range(self, oid: int, path: str, offset: int, size: int) -> bool: ...
    def to_node(self, index: int, msg: tuple) -> None: ...


class _NullClientType(Client):
    pass


NULL_CLIENT = _NullClientType(None, "none", 0, 0, 0)
"""The owner of an actor's constructor record when its driver is gone: messages to it go
nowhere (`NodeIO.send` skips a client without a peer)."""

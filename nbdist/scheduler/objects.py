"""The object table: every object this node knows, why it is kept, and where its bytes are
(layer L1).

Owns ``by_id`` (object id -> `Obj`), the shared-memory accounting and the spill policy, and the
objects borrowed from or being fetched from other nodes.

Reference counts. ``Obj.count`` is the number of reasons to keep an object: each client
process holding a ref (``Client.holds``), each unfinished task using it as an argument or
carrying it inside its arguments, each stored object containing it. At zero a stored object is
freed (its shm file unlinked, or its spill file removed) and its owner's driver told (batched,
`Notices.freed`). An id with no object yet (a ref to a value still on its way, or already gone)
gets a PENDING slot so counts balance. Actor ids are counted too (a handle is a ref): those go
to ``actor_ref``, which owns actor handles.

Memory. Shared memory holds at most ``capacity`` bytes: stored objects (``store_used``) plus
room granted to writers that have not stored yet (``reserved_total``). When a write does not
fit, the least recently needed stored objects (``Obj.used``, a logical clock bumped on every
store and read) are spilled to disk through the daemon (`NodeIO.spill`, the file I/O), up to
``spill_limit`` bytes on disk (0: no limit); a spilled object is restored on its next read. A
write that cannot get room is refused with an error text (never silently dropped); a read
never fails for lack of room (restoring may overfill the store for a moment).

Other nodes. An object owned by another node (its id's owner bits) is fetched from it on
first need (``fetching``) and, while we hold a ref to it, borrowed (``borrowed``: that node
keeps it alive for us until we let go). A node that is lost fails what we were fetching from it.

The table calls out (no import of the node state): ``deps_ready(task)`` when a task's last
missing argument is stored, ``producer(oid)`` for the unfinished task returning an id here
(a value a forwarded task makes here is not fetched), ``actor_ref(oid, delta)`` for actor ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .. import protocol as P
from ..exceptions import ObjectLostError
from ..serialization import system_error_blob
from .notices import Notices
from .records import PENDING, READY, Client, NodeIO, Obj, Task

MiB = 2**20


class ObjectTable:
    def __init__(self, io: NodeIO, node_index: int, capacity: int, notices: Notices,
                 deps_ready: Callable[[Task], None], producer: Callable[[int], Task | None],
                 actor_ref: Callable[[int, int], bool]) -> None:
        self.io = io
        self.node_index = node_index
        self.notices = notices
        self.deps_ready = deps_ready
        self.producer = producer
        self.actor_ref = actor_ref
        self.by_id: dict[int, Obj] = {}
        self.capacity = capacity
        self.store_used = 0
        self.reserved_total = 0
        self.spilled_used = 0
        self.spill_limit = 0
        self.spill_count = 0
        self.restore_count = 0
        self.clock = 0
        self.fetching: set[int] = set()  # objects asked of their owner node
        self.borrowed: dict[int, int] = {}  # oid -> owner node holding it for us
        self.lost_nodes: set[int] = set()

    def __len__(self) -> int:
        return len(self.by_id)

    def __contains__(self, oid: int) -> bool:
        return oid in self.by_id

    # ---------------------------------------------------------------- reference counts
    def incref(self, oid: int) -> None:
        obj = self.by_id.get(oid)
        if obj is not None:
            obj.count += 1
            return
        if self.actor_ref(oid, 1):
            return
        obj = Obj()
        obj.count = 1
        self.by_id[oid] = obj
        owner = oid >> P.OWNER_SHIFT
        if owner not in (0, self.node_index) and oid not in self.borrowed:
            # Another node's object or actor: it stays alive there while we hold it.
            self.borrowed[oid] = owner
            self.io.to_node(owner, (P.NODE_REFS, [(1, oid)]))

    def decref(self, oid: int) -> None:
        obj = self.by_id.get(oid)
        if obj is not None:
            obj.count -= 1
            if obj.count <= 0 and obj.state == READY:
                self.free(oid, obj)
            elif (obj.count <= 0 and obj.state == PENDING and not obj.waiting
                  and self.producer(oid) is None):
                self.by_id.pop(oid, None)
                self.unborrow(oid)
            return
        self.actor_ref(oid, -1)

    def refs(self, client: Client, ops: Iterable[tuple[int, int]]) -> None:
        holds = client.holds
        for sign, oid in ops:
            if sign > 0:
                if oid not in holds:
                    holds.add(oid)
                    self.incref(oid)
            elif oid in holds:
                holds.discard(oid)
                self.decref(oid)

    def hold(self, client: Client, oid: int, obj: Obj) -> None:
        """``client`` holds a ref to ``obj`` (once, however often it says so)."""
        if oid not in client.holds:
            client.holds.add(oid)
            obj.count += 1

    def slot(self, oid: int) -> Obj:
        obj = self.by_id.get(oid)
        if obj is None:
            obj = self.by_id[oid] = Obj()
        return obj

    def unborrow(self, oid: int) -> None:
        owner = self.borrowed.pop(oid, None)
        if owner is not None:
            self.io.to_node(owner, (P.NODE_REFS, [(-1, oid)]))

    def free(self, oid: int, obj: Obj) -> None:
        if self.by_id.get(oid) is not obj:
            # Freed already: storing a value can end the tasks waiting for it (an error
            # result), and their ending can drop its last reference before the store returns.
            return
        del self.by_id[oid]
        if self.borrowed:
            self.unborrow(oid)
        if obj.spilled is not None:
            self.spilled_used -= obj.shm_size
            self.io.remove_spill(obj.spilled)
            obj.spilled = None
            obj.shm_size = 0
        if obj.shm_size:
            self.store_used -= obj.shm_size
            self.io.unlink(oid)
        for inner in obj.contained:
            self.decref(inner)
        self.notices.freed.setdefault(obj.owner_job, []).append(oid)

    # ---------------------------------------------------------------- values
    def put(self, client: Client, oid: int, blob: bytes | None, shm_size: int,
            contained: tuple[int, ...]) -> None:
        obj = self.slot(oid)
        obj.owner_job = client.job
        self.hold(client, oid, obj)
        self.unreserve(client, oid)
        self.store(oid, obj, (oid, blob, shm_size), contained)

    def store(self, oid: int, obj: Obj, loc: tuple, contained: tuple[int, ...]) -> None:
        """``obj``'s value (or error) is here: wake its getters and the tasks waiting for it."""
        obj.state = READY
        obj.blob = loc[1]
        obj.shm_size = loc[2]
        if obj.shm_size:
            self.store_used += obj.shm_size
            self.clock += 1
            obj.used = self.clock
            if self.store_used + self.reserved_total > self.capacity:
                self.make_room(0)  # written here without a grant (a copy from another node)
        obj.contained = contained
        for inner in contained:
            self.incref(inner)
        obj.error = obj.blob is not None and obj.blob[:1] in (b"E", b"S")
        for sub in obj.subscribers:
            self.io.send(sub, (P.OBJ, loc))
        obj.subscribers = []
        waiting = obj.waiting
        obj.waiting = []
        for task in waiting:
            task.missing -= 1
            if task.missing == 0:
                self.deps_ready(task)
        if obj.count <= 0:
            self.free(oid, obj)

    def store_results(self, owner: Client, locs: list) -> None:
        """A task's results (or its error in each of them), told to ``owner`` already."""
        for loc in locs:
            oid = loc[0]
            obj = self.by_id.get(oid)
            if obj is None:
                # Nobody holds it any more; the value is not needed.
                if loc[2]:
                    self.io.unlink(oid)
                continue
            obj.subscribers = [s for s in obj.subscribers if s is not owner]
            self.store(oid, obj, loc[:3], loc[3] if len(loc) > 3 else ())

    def store_direct(self, writer: Client, owner: Client | None, job: int, locs: list) -> None:
        """Results of a driver's direct call that ``writer`` (the actor's worker) stored here
        for that driver (``owner``, if connected here)."""
        for loc in locs:
            oid = loc[0]
            self.unreserve(writer, oid)
            obj = self.slot(oid)
            obj.owner_job = job
            if owner is not None:
                self.hold(owner, oid, obj)
            self.store(oid, obj, loc[:3], loc[3] if len(loc) > 3 else ())

    def loc(self, oid: int) -> tuple | None:
        """Where a stored value is, restoring it from disk first if it was spilled."""
        obj = self.by_id.get(oid)
        if obj is None or obj.state != READY:
            return None
        if obj.shm_size:
            self.clock += 1
            obj.used = self.clock
            if obj.spilled is not None:
                self.restore(oid, obj)
        return (oid, obj.blob, obj.shm_size)

    def get_request(self, client: Client, oids: Iterable[int]) -> None:
        for oid in oids:
            obj = self.by_id.get(oid)
            if obj is None and oid >> P.OWNER_SHIFT not in (0, self.node_index) and (
                    client.kind != P.KIND_NODE):
                obj = self.by_id[oid] = Obj()  # a copy is on its way from the owner
            if obj is None:
                err = ObjectLostError(f"Object {oid:x} is gone: it was freed or never existed.")
                self.io.send(client, (P.OBJ, (oid, system_error_blob(err), 0)))
            elif obj.state == READY:
                self.io.send(client, (P.OBJ, self.loc(oid)))
            else:
                if client not in obj.subscribers:
                    obj.subscribers.append(client)
                self.fetch_if_foreign(oid)

    def fail(self, oid: int, obj: Obj, err: Exception) -> None:
        self.store(oid, obj, (oid, system_error_blob(err), 0), ())

    # ---------------------------------------------------------------- other nodes' objects
    def fetch_if_foreign(self, oid: int) -> None:
        owner = oid >> P.OWNER_SHIFT
        if owner in (0, self.node_index) or oid in self.fetching:
            return
        if owner in self.lost_nodes:
            obj = self.by_id.get(oid)
            if obj is not None and obj.state == PENDING and self.producer(oid) is None:
                self.fail(oid, obj, ObjectLostError(
                    f"Object {oid:x} was lost with the node that owned it (node {owner})."))
            return
        if self.producer(oid) is not None:
            return  # made here by a task forwarded to us
        self.fetching.add(oid)
        self.io.to_node(owner, (P.FETCH, [oid]))

    def value_arrived(self, loc: tuple) -> None:
        """A copy of an object fetched from its owner node."""
        oid = loc[0]
        self.fetching.discard(oid)
        obj = self.by_id.get(oid)
        if obj is None or obj.state == READY:
            if loc[2]:
                self.io.unlink(oid)
            return
        self.store(oid, obj, loc[:3], loc[3] if len(loc) > 3 else ())

    def hold_copies(self, peer: Client, dep_locs: list) -> None:
        """Node ``peer`` sent copies of a forwarded task's arguments: held for it until the
        task ends (a copy of one we have already is dropped)."""
        for loc in dep_locs:
            obj = self.by_id.get(loc[0])
            if obj is not None and obj.state == READY:
                if loc[2]:
                    self.io.unlink(loc[0])
                self.hold(peer, loc[0], obj)
                continue
            self.put(peer, loc[0], loc[1], loc[2], ())

    def borrow_contained(self, index: int, locs: list) -> None:
        """Results that came back from node ``index`` contain refs to its objects: that node
        holds them until we let go."""
        for loc in locs:
            for inner in loc[3] if len(loc) > 3 else ():
                if inner >> P.OWNER_SHIFT == index:
                    self.borrowed[inner] = index

    def node_lost(self, index: int) -> None:
        self.lost_nodes.add(index)
        for oid in [o for o in self.fetching if o >> P.OWNER_SHIFT == index]:
            self.fetching.discard(oid)
            obj = self.by_id.get(oid)
            if obj is not None and obj.state == PENDING:
                self.fail(oid, obj, ObjectLostError(
                    f"Object {oid:x} was lost with the node that owned it."))
        for oid in [o for o, owner in self.borrowed.items() if owner == index]:
            del self.borrowed[oid]

    # ---------------------------------------------------------------- memory
    def reserve(self, client: Client, oid: int, size: int) -> str | None:
        """Grant ``client`` room for an object of ``size`` bytes it is about to write into
        shared memory, spilling others to disk if needed; an error text if there is none."""
        if size > self.capacity:
            return (f"The object ({size / MiB:.1f} MiB) is larger than the whole object store "
                    f"({self.capacity / MiB:.1f} MiB). Start the cluster with a larger "
                    "object_store_memory, or split the value.")
        if not self.make_room(size):
            return (f"The object store is full: {size / MiB:.1f} MiB more do not fit in "
                    f"{self.capacity / MiB:.1f} MiB ({self.store_used / MiB:.1f} MiB used), "
                    f"and spilling cannot make room ({self.spilled_used / MiB:.1f} MiB "
                    "spilled to disk, at its limit or the disk is full). Free some objects "
                    "(drop refs), or give the cluster more object_store_memory.")
        client.reserved[oid] = client.reserved.get(oid, 0) + size
        self.reserved_total += size
        return None

    def unreserve(self, client: Client, oid: int) -> None:
        if client.reserved:
            self.reserved_total -= client.reserved.pop(oid, 0)

    def release_grants(self, client: Client) -> None:
        """``client`` is gone: the room granted to it and never used is free again."""
        for size in client.reserved.values():
            self.reserved_total -= size
        client.reserved = {}

    def make_room(self, size: int) -> bool:
        """The spill policy: least recently needed first, while the disk limit allows."""
        over = self.store_used + self.reserved_total + size - self.capacity
        if over <= 0:
            return True
        victims = sorted(((obj.used, oid, obj) for oid, obj in self.by_id.items()
                          if obj.state == READY and obj.shm_size and obj.spilled is None),
                         key=lambda v: v[0])
        for _, oid, obj in victims:
            if over <= 0:
                break
            if self.spill_limit and self.spilled_used + obj.shm_size > self.spill_limit:
                continue
            path = self.io.spill(oid, obj.shm_size)
            if path is None:
                return False
            obj.spilled = path
            self.store_used -= obj.shm_size
            self.spilled_used += obj.shm_size
            self.spill_count += 1
            over -= obj.shm_size
        return over <= 0

    def restore(self, oid: int, obj: Obj) -> None:
        path = obj.spilled
        assert path is not None
        self.make_room(obj.shm_size)  # best effort: a read must not fail for lack of room
        obj.spilled = None
        self.spilled_used -= obj.shm_size
        if not self.io.restore(oid, path):
            err = ObjectLostError(f"Object {oid:x} could not be read back from disk ({path}).")
            obj.shm_size = 0
            obj.blob = system_error_blob(err)
            obj.error = True
            return
        self.store_used += obj.shm_size
        self.restore_count += 1

    def spilled_ids(self, limit: int) -> list[int]:
        """The objects on disk now (for the panel)."""
        out = []
        for oid, obj in self.by_id.items():
            if obj.spilled is not None:
                out.append(oid)
                if len(out) >= limit:
                    break
        return out

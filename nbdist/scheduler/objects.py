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

The arena (`nbdist.objects.store`). Once the daemon gives the table one (`enable_arena`), room for a
large object is a range of it (``arena``, an `Allocator`): granted with the room (``reserve``;
``Client.grants`` until the writer stores it), the object's while it is stored there
(``Obj.offset``), given back when it is freed or spilled. Pages are committed (``committed``,
the high-water mark; `NodeIO.commit_arena`) before a range above it is first granted. Readers
hold *leases*: each location in the arena sent to a process (`lease`) counts one on its range,
in ``Client.leases`` and ``pins`` (offset -> leases out), until the process gives it back
(`unpin`) or goes away. Invariant: a range is reused only when no object is stored in it and
``pins`` has no entry for it; a range let go while leased waits in ``lingering`` for its last
lease. Spilling prefers objects nobody reads; a leased one may still be spilled (its bytes
reach the disk, its range lingers; the store's accounting counts it out at once, as it did for
an unlinked file still mapped). What the arena cannot take (none, too small, fragmented, tmpfs
full) becomes a file per object, as without an arena.

Other nodes. An object owned by another node (its id's owner bits) is fetched from it on
first need (``fetching``) and, while we hold a ref to it, borrowed (``borrowed``: that node
keeps it alive for us until we let go). A node that is lost fails what we were fetching from it.

Where an object is, without its bytes (Ray's ``wait(fetch_local=False)``). A client that only
needs to know that an object exists somewhere in the cluster sends ``LOCATE``: an object stored
here, or one of ours once it is stored, is answered at once with ``PRESENT``; one owned by
another node is asked of that node (``LOCATE`` again, once per id however many ask here), which
answers ``PRESENT`` when it has it. ``locating`` lists who waits to hear of each id. Nothing is
copied: a later get fetches it as usual.

The table calls out (no import of the node state): ``deps_ready(task)`` when a task's last
missing argument is stored, ``producer(oid)`` for the unfinished task returning an id here
(a value a forwarded task makes here is not fetched), ``actor_ref(oid, delta)`` for actor ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from nbdist import events as ev
from nbdist.exceptions import ObjectLostError
from nbdist.objects.store import Allocator
from nbdist.scheduler.notices import Notices
from nbdist.scheduler.records import PENDING, READY, Client, NodeIO, Obj, Task
from nbdist.wire import protocol as P
from nbdist.wire.serialization import system_error_blob

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
        self.arena: Allocator | None = None
        self.committed = 0
        self.pins: dict[int, int] = {}  # arena offset -> leases out
        self.lingering: dict[int, int] = {}  # arena offset -> size: freed, waits for its leases
        self.locating: dict[int, list[Client]] = {}  # oid -> who waits to hear it exists
        # Ids whose leaving the table someone must hear of (`nbdist.scheduler.lineage`).
        self.watched: Mapping[int, object] = {}
        self.gone: Callable[[int], None] = lambda oid: None

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
                if self.locating:
                    self.locating.pop(oid, None)
                if self.watched and oid in self.watched:
                    self.gone(oid)
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
        if self.watched and oid in self.watched:
            self.gone(oid)
        size = obj.shm_size or len(obj.blob or b"")  # (for its record: spilling zeroes it)
        if self.borrowed:
            self.unborrow(oid)
        if obj.spilled is not None:
            self.spilled_used -= obj.shm_size
            self.io.remove_spill(obj.spilled)
            obj.spilled = None
            obj.shm_size = 0
        if obj.shm_size:
            self.store_used -= obj.shm_size
            self.drop(oid, obj.shm_size, obj.offset)
        for inner in obj.contained:
            self.decref(inner)
        self.notices.freed(obj.owner_job, oid, size)

    # ---------------------------------------------------------------- values
    def put(self, client: Client, oid: int, blob: bytes | None, shm_size: int,
            contained: tuple[int, ...], offset: int = -1) -> None:
        obj = self.slot(oid)
        obj.owner_job = client.job
        self.hold(client, oid, obj)
        self.unreserve(client, oid)
        loc = (oid, blob, shm_size, (), offset)
        self.lease(client, (loc,))  # the writer reads its own value through the arena too
        self.store(oid, obj, loc, contained)

    def store(self, oid: int, obj: Obj, loc: tuple, contained: tuple[int, ...]) -> None:
        """``obj``'s value (or error) is here: wake its getters and the tasks waiting for it."""
        obj.state = READY
        obj.blob = loc[1]
        obj.shm_size = loc[2]
        obj.offset = P.loc_offset(loc)
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
        if obj.subscribers:
            out = self.where(oid, obj)
            for sub in obj.subscribers:
                self.lease(sub, (out,))
                self.io.send(sub, (P.OBJ, out))
            obj.subscribers = []
        if self.locating:
            for client in self.locating.pop(oid, ()):
                self.io.send(client, (P.PRESENT, [oid]))
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
                    self.drop(oid, loc[2], P.loc_offset(loc))
                continue
            obj.subscribers = [s for s in obj.subscribers if s is not owner]
            self.store(oid, obj, loc, loc[3] if len(loc) > 3 else ())

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
            self.store(oid, obj, loc, loc[3] if len(loc) > 3 else ())

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
        return self.where(oid, obj)

    @staticmethod
    def where(oid: int, obj: Obj) -> tuple:
        if obj.offset >= 0:
            return (oid, None, obj.shm_size, (), obj.offset)
        return (oid, obj.blob, obj.shm_size)

    def get_request(self, client: Client, oids: Iterable[int], coming: bool = False) -> None:
        """Send ``client`` each object once it is here. An unknown id is gone, unless it is
        ``coming``: the asker got its location from a process that holds it, whose PUT may
        still be on its way on another connection (a direct call's argument)."""
        for oid in oids:
            obj = self.by_id.get(oid)
            if obj is None and (coming or oid >> P.OWNER_SHIFT not in (0, self.node_index)
                                and client.kind != P.KIND_NODE):
                obj = self.by_id[oid] = Obj()  # on its way (from its writer, or its owner node)
            if obj is None:
                err = ObjectLostError(f"Object {oid:x} is gone: it was freed or never existed.")
                self.io.send(client, (P.OBJ, (oid, system_error_blob(err), 0)))
            elif obj.state == READY:
                loc = self.loc(oid)
                assert loc is not None
                self.lease(client, (loc,))
                self.io.send(client, (P.OBJ, loc))
            else:
                if client not in obj.subscribers:
                    obj.subscribers.append(client)
                self.fetch_if_foreign(oid)

    def locate(self, client: Client, oids: Iterable[int]) -> None:
        """Tell ``client`` (``PRESENT``) once each object exists here or on its owner node,
        copying nothing (see the module docstring). One unknown here and owned here is gone:
        it is answered as a get (its error, which counts as ready too)."""
        for oid in oids:
            obj = self.by_id.get(oid)
            if obj is not None and obj.state == READY:
                self.io.send(client, (P.PRESENT, [oid]))
                continue
            owner = oid >> P.OWNER_SHIFT
            foreign = owner not in (0, self.node_index)
            if obj is None and not foreign:
                self.get_request(client, [oid])
                continue
            waiting = self.locating.setdefault(oid, [])
            if client in waiting:
                continue
            waiting.append(client)
            if not foreign or self.producer(oid) is not None:
                continue  # stored here when it is made
            if owner in self.lost_nodes:
                self.slot(oid)
                self.fetch_if_foreign(oid)  # fails it (or waits for the task rebuilding it)
            elif len(waiting) == 1:
                self.io.to_node(owner, (P.LOCATE, [oid]))

    def present_elsewhere(self, oids: Iterable[int]) -> None:
        """Another node has these objects: tell who waits to hear it."""
        for oid in oids:
            for client in self.locating.pop(oid, ()):
                self.io.send(client, (P.PRESENT, [oid]))

    # ---------------------------------------------------------------- the arena
    def enable_arena(self, size: int) -> None:
        self.arena = Allocator(size)

    def lease(self, client: Client, locs: Iterable[tuple | None]) -> None:
        """``locs`` go to ``client``: each one in the arena is a lease on its range until the
        process gives it back. Another node copies at once (no lease); a client without a
        connection receives nothing."""
        if self.arena is None or client.peer is None or client.kind == P.KIND_NODE:
            return
        leases, pins = client.leases, self.pins
        for loc in locs:
            if loc is not None and len(loc) > 4 and loc[4] >= 0:
                offset = loc[4]
                leases[offset] = leases.get(offset, 0) + 1
                pins[offset] = pins.get(offset, 0) + 1

    def unpin(self, client: Client, offsets: Iterable[int]) -> None:
        """``client`` gave back one lease on each of ``offsets``."""
        leases = client.leases
        for offset in offsets:
            n = leases.get(offset, 0)
            if n <= 0:
                continue  # not a lease of this process's: nothing to give back
            if n == 1:
                del leases[offset]
            else:
                leases[offset] = n - 1
            self._unpinned(offset, 1)

    def _unpinned(self, offset: int, n: int) -> None:
        left = self.pins[offset] - n
        if left > 0:
            self.pins[offset] = left
            return
        del self.pins[offset]
        size = self.lingering.pop(offset, None)
        if size is not None and self.arena is not None:
            self.arena.release(offset, size)

    def drop(self, oid: int, size: int, offset: int) -> None:
        """The bytes of a value no object keeps any more: its arena range is free (once no
        reader leases it), or its file unlinked."""
        if offset < 0:
            self.io.unlink(oid)
        elif offset in self.pins:
            self.lingering[offset] = size
        elif self.arena is not None:
            self.arena.release(offset, size)

    def drop_unstored(self, locs: Iterable[tuple]) -> None:
        """Results written into granted ranges that will never be stored (their task ended
        otherwise): the ranges are free again. Files are left alone (named by id, they may
        be another attempt's)."""
        for loc in locs:
            offset = P.loc_offset(loc)
            if offset >= 0:
                self.drop(loc[0], loc[2], offset)

    def _allocate(self, size: int) -> int:
        """A range of the arena for ``size`` bytes, its pages committed; -1 if there is none."""
        arena = self.arena
        if arena is None:
            return -1
        offset = arena.alloc(size)
        if offset < 0:
            return -1
        end = offset + size
        if end > self.committed:
            end = min(arena.size, max(end, self.committed + (64 << 20)))  # fewer, larger steps
            if not self.io.commit_arena(self.committed, end):
                arena.release(offset, size)
                return -1
            self.committed = end
        return offset

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
        self.store(oid, obj, loc, loc[3] if len(loc) > 3 else ())

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
            if obj is not None and obj.state == PENDING and self.producer(oid) is None:
                self.fail(oid, obj, ObjectLostError(
                    f"Object {oid:x} was lost with the node that owned it."))
        for oid in [o for o, owner in self.borrowed.items() if owner == index]:
            del self.borrowed[oid]
        for oid in [o for o in self.locating if o >> P.OWNER_SHIFT == index]:
            self.slot(oid)
            self.fetch_if_foreign(oid)  # the answer will not come: fail it (or rebuild it)

    # ---------------------------------------------------------------- memory
    def reserve(self, client: Client, oid: int, size: int, arena: bool = False) -> str | None:
        """Grant ``client`` room for an object of ``size`` bytes it is about to write into
        shared memory, spilling others to disk if needed; an error text if there is none.
        With ``arena`` (the client maps it), the room is a range of the arena when one is
        free: ``client.grants[oid]``."""
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
        if arena and oid not in client.grants:
            offset = self._allocate(size)
            if offset >= 0:
                client.grants[oid] = (offset, size)
        return None

    def unreserve(self, client: Client, oid: int) -> None:
        """``client`` wrote ``oid``: its room is the stored object's now."""
        if client.reserved:
            self.reserved_total -= client.reserved.pop(oid, 0)
            if client.grants:
                client.grants.pop(oid, None)

    def release_grants(self, client: Client) -> None:
        """``client`` is gone: the room granted to it and never used is free again, and so
        are its leases."""
        for size in client.reserved.values():
            self.reserved_total -= size
        client.reserved = {}
        for offset, size in client.grants.values():
            self.drop(0, size, offset)
        client.grants = {}
        for offset, n in client.leases.items():
            self._unpinned(offset, n)
        client.leases = {}

    def make_room(self, size: int) -> bool:
        """The spill policy: least recently needed first, while the disk limit allows."""
        over = self.store_used + self.reserved_total + size - self.capacity
        if over <= 0:
            return True
        pins = self.pins
        victims = sorted(((obj.offset in pins, obj.used, oid, obj)
                          for oid, obj in self.by_id.items()
                          if obj.state == READY and obj.shm_size and obj.spilled is None),
                         key=lambda v: v[:2])  # what nobody reads first, then the oldest
        for _, _, oid, obj in victims:
            if over <= 0:
                break
            if self.spill_limit and self.spilled_used + obj.shm_size > self.spill_limit:
                continue
            if obj.offset >= 0:
                path = self.io.spill_range(oid, obj.offset, obj.shm_size)
            else:
                path = self.io.spill(oid, obj.shm_size)
            if path is None:
                return False
            if obj.offset >= 0:
                self.drop(oid, obj.shm_size, obj.offset)
                obj.offset = -1
            obj.spilled = path
            self.store_used -= obj.shm_size
            self.spilled_used += obj.shm_size
            self.spill_count += 1
            self.notices.later(obj.owner_job, ev.ObjectSpilled,
                               (oid, obj.shm_size, self.notices.node_id))
            over -= obj.shm_size
        return over <= 0

    def restore(self, oid: int, obj: Obj) -> None:
        path = obj.spilled
        assert path is not None
        self.make_room(obj.shm_size)  # best effort: a read must not fail for lack of room
        obj.spilled = None
        self.spilled_used -= obj.shm_size
        offset = self._allocate(obj.shm_size)
        if offset >= 0:
            restored = self.io.restore_range(oid, path, offset, obj.shm_size)
            if restored:
                obj.offset = offset
            else:
                self.drop(oid, obj.shm_size, offset)
        else:
            restored = self.io.restore(oid, path)
        if not restored:
            err = ObjectLostError(f"Object {oid:x} could not be read back from disk ({path}).")
            obj.shm_size = 0
            obj.blob = system_error_blob(err)
            obj.error = True
            return
        self.store_used += obj.shm_size
        self.restore_count += 1
        self.notices.later(obj.owner_job, ev.ObjectRestored,
                           (oid, obj.shm_size, self.notices.node_id))

    def spilled_ids(self, limit: int) -> list[int]:
        """The objects on disk now (for the panel)."""
        out = []
        for oid, obj in self.by_id.items():
            if obj.spilled is not None:
                out.append(oid)
                if len(out) >= limit:
                    break
        return out

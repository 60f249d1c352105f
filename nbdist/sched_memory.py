"""NodeState's memory pressure (see `nbdist.scheduler`): room granted to writers, objects
spilled to disk when shared memory is full and restored when needed. Plain functions taking the
state, bound as NodeState methods in its class body.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .exceptions import ObjectLostError
from .sched_records import READY, Client, Obj
from .serialization import system_error_blob

if TYPE_CHECKING:
    from .scheduler import NodeState


def reserve(self: NodeState, client: Client, oid: int, size: int) -> str | None:
    """Grant ``client`` room for an object of ``size`` bytes it is about to write into
    shared memory, spilling others to disk if needed; an error text if there is none."""
    if size > self.capacity:
        return (f"The object ({size / 2**20:.1f} MiB) is larger than the whole object store "
                f"({self.capacity / 2**20:.1f} MiB). Start the cluster with a larger "
                "object_store_memory, or split the value.")
    if not self._make_room(size):
        return (f"The object store is full: {size / 2**20:.1f} MiB more do not fit in "
                f"{self.capacity / 2**20:.1f} MiB ({self.store_used / 2**20:.1f} MiB used), "
                f"and spilling cannot make room ({self.spilled_used / 2**20:.1f} MiB "
                "spilled to disk, at its limit or the disk is full). Free some objects "
                "(drop refs), or give the cluster more object_store_memory.")
    client.reserved[oid] = client.reserved.get(oid, 0) + size
    self.reserved_total += size
    return None


def _unreserve(self: NodeState, client: Client, oid: int) -> None:
    if client.reserved:
        size = client.reserved.pop(oid, 0)
        self.reserved_total -= size


def _make_room(self: NodeState, size: int) -> bool:
    over = self.store_used + self.reserved_total + size - self.capacity
    if over <= 0:
        return True
    victims = sorted(((obj.used, oid, obj) for oid, obj in self.objects.items()
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


def _restore(self: NodeState, oid: int, obj: Obj) -> None:
    path = obj.spilled
    assert path is not None
    self._make_room(obj.shm_size)  # best effort: a read must not fail for lack of room
    if not self.io.restore(oid, path):
        err = ObjectLostError(f"Object {oid:x} could not be read back from disk ({path}).")
        obj.spilled = None
        self.spilled_used -= obj.shm_size
        obj.shm_size = 0
        obj.blob = system_error_blob(err)
        obj.error = True
        return
    obj.spilled = None
    self.spilled_used -= obj.shm_size
    self.store_used += obj.shm_size
    self.restore_count += 1

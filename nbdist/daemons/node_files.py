"""The node daemon's files: its shared-memory arena and object files, values sent to and
received from other nodes, and the spill directory (layer L2).

`NodeFiles` does the file I/O the scheduler asks of its node (through the daemon's ``NodeIO``
methods, which delegate here); which objects go to disk, and when, is the object table's policy
(`scheduler.objects.ObjectTable.make_room`). A value for another node travels as bytes, or, to a
node on the same machine (same boot id and /dev/shm), as a hard link it renames into place.
"""

from __future__ import annotations

import logging
import mmap
import os
import pickle
import shutil
import tempfile
import weakref
from typing import Any

from nbdist import config as config_mod
from nbdist.cluster import lifetime
from nbdist.exceptions import ObjectLostError
from nbdist.objects import store
from nbdist.objects.store import unlink as unlink_file
from nbdist.wire import protocol as P
from nbdist.wire.serialization import system_error_blob

log = logging.getLogger("nbdist.daemons.node")


class NodeFiles:
    """The files of one node daemon (its pid names them)."""

    def __init__(self, cfg: config_mod.Config, node_pid: int) -> None:
        self.cfg = cfg
        self.shm_dir = cfg.shm_dir
        self.node_pid = node_pid
        self.boot_id = lifetime.boot_id()
        self.spill_dir = ""  # made at the first spill, removed with the node
        self._received_files: dict[int, tuple[weakref.ref[mmap.mmap], str, int]] = {}
        self._receive_seq = 0
        self._link_seq = 0
        self.arena: store.Arena | None = None
        arena_size = cfg.object_store_memory if cfg.arena_bytes == 0 else cfg.arena_bytes
        if arena_size >= store.ARENA_ALIGN:
            try:
                self.arena = store.create_arena(
                    os.path.join(self.shm_dir, P.arena_name(node_pid)), arena_size)
            except OSError as exc:
                log.warning("nbdist node: no shared-memory arena (%s): one file per object", exc)

    def portable(self, loc: tuple, index: int, peer: dict[str, Any]) -> tuple:
        """A Loc made portable for node ``index`` (``peer``: the head's record of it): ``(oid, blob, data, contained, link, size)``.
        The bytes of a shared-memory file go along as ``data``; to a node on this machine (it
        shares /dev/shm) a hard link named for it goes instead, which it renames into place:
        no copy at all."""
        oid, blob, size = loc[0], loc[1], loc[2]
        contained = tuple(loc[3]) if len(loc) > 3 else ()
        if blob is not None or not size:
            return (oid, blob, None, contained, "", 0)
        offset = P.loc_offset(loc)
        if offset >= 0 and self.arena is not None:
            # A copy: the transport writes out of band later, when the range may be reused.
            data = pickle.PickleBuffer(bytearray(self.arena.read(offset, size)))
            return (oid, None, data, contained, "", size)
        if (self.cfg.same_host_links and peer.get("boot_id") == self.boot_id
                and peer.get("shm_dir") == self.shm_dir and peer.get("pid")):
            self._link_seq += 1
            link = os.path.join(self.shm_dir,
                                f"nbdist-{peer['pid']}-from{self.node_pid}x{self._link_seq}")
            try:
                os.link(self.shm_path(oid), link)
                return (oid, None, None, contained, link, size)
            except OSError as exc:
                log.warning("nbdist node: cannot link object %x for node %d: %s", oid, index,
                            exc)
        data = pickle.PickleBuffer(store.map_readonly(self.shm_path(oid)))
        return (oid, None, data, contained, "", size)

    def local(self, val: tuple) -> tuple:
        """A received value as a Loc of this node (a shared-memory copy when it has data)."""
        oid, blob, data, contained, link, size = val
        path = self.shm_path(oid)
        if link:
            unlink_file(path)
            try:
                os.rename(link, path)
            except OSError as exc:
                unlink_file(link)
                err = ObjectLostError(f"Object {oid:x} did not arrive from another node: {exc}")
                return (oid, system_error_blob(err), 0, contained)
            return (oid, None, size, contained)
        if data is None:
            return (oid, blob, 0, contained)
        unlink_file(path)
        view = memoryview(data)
        received = self._received_files.pop(id(view.obj), None)
        if received is not None and received[0]() is view.obj and view.nbytes == received[2]:
            os.rename(received[1], path)  # it was read straight into a file of the store
        else:
            store.write(path, [view], view.nbytes)
        return (oid, None, view.nbytes, contained)

    def receive_file(self, n: int) -> memoryview:
        """`server.Server.alloc`: a large value from another node is read straight into a
        shared-memory file, renamed into place when its message is handled."""
        self._receive_seq += 1
        path = os.path.join(self.shm_dir, f"nbdist-{self.node_pid}-in{self._receive_seq}")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, n)
            mm = mmap.mmap(fd, max(n, 1))
        finally:
            os.close(fd)
        # Files never claimed (a connection dropped mid-frame) go when their mapping does.
        for key in [k for k, (ref, p, _) in self._received_files.items() if ref() is None]:
            unlink_file(self._received_files.pop(key)[1])
        self._received_files[id(mm)] = (weakref.ref(mm), path, n)
        return memoryview(mm)[:n]

    def shm_path(self, oid: int) -> str:
        return os.path.join(self.shm_dir, P.shm_name(self.node_pid, oid))

    # ---------------------------------------------------------------- spilling
    # The file I/O only: which objects go to disk, and when, is the object table's policy
    # (`scheduler.objects.ObjectTable.make_room`).
    def _spill_path(self, oid: int) -> str:
        if not self.spill_dir:
            self.spill_dir = os.path.join(self.cfg.spill_dir or tempfile.gettempdir(),
                                          f"nbdist-spill-{self.node_pid}")
            os.makedirs(self.spill_dir, mode=0o700, exist_ok=True)
        return os.path.join(self.spill_dir, f"{oid:x}")

    def spill(self, oid: int, size: int) -> str | None:
        path = self._spill_path(oid)
        try:
            shutil.copyfile(self.shm_path(oid), path)
        except OSError as exc:
            log.error("nbdist node: cannot spill object %x to %s: %s", oid, path, exc)
            unlink_file(path)
            return None
        unlink_file(self.shm_path(oid))
        return path

    def restore(self, oid: int, path: str) -> bool:
        target = self.shm_path(oid)
        try:
            shutil.copyfile(path, target)
        except OSError as exc:
            log.error("nbdist node: cannot restore object %x from %s: %s", oid, path, exc)
            unlink_file(target)
            return False
        unlink_file(path)
        return True

    def remove_spill(self, path: str) -> None:
        unlink_file(path)

    def commit_arena(self, start: int, end: int) -> bool:
        return self.arena is not None and self.arena.commit(start, end)

    def spill_range(self, oid: int, offset: int, size: int) -> str | None:
        assert self.arena is not None
        path = self._spill_path(oid)
        try:
            with open(path, "wb") as f:
                f.write(self.arena.read(offset, size))
        except OSError as exc:
            log.error("nbdist node: cannot spill object %x to %s: %s", oid, path, exc)
            unlink_file(path)
            return None
        return path

    def restore_range(self, oid: int, path: str, offset: int, size: int) -> bool:
        assert self.arena is not None
        try:
            with open(path, "rb", buffering=0) as f:
                got = f.readinto(self.arena.view[offset:offset + size])
        except OSError as exc:
            log.error("nbdist node: cannot restore object %x from %s: %s", oid, path, exc)
            return False
        if got != size:
            log.error("nbdist node: spill file %s of object %x is short", path, oid)
            return False
        unlink_file(path)
        return True

    def unlink(self, oid: int) -> None:
        unlink_file(self.shm_path(oid))


    def close(self) -> None:
        """Remove every file of this node: shared memory, spilled objects."""
        lifetime.remove_shm_of(self.shm_dir, self.node_pid)
        if self.spill_dir:
            shutil.rmtree(self.spill_dir, ignore_errors=True)

"""Shared-memory buffers of the ranks of a group on one node.

Each rank owns one buffer (a file in /dev/shm mapped into every rank's process). A collective
copies each rank's input into its own buffer, then every rank reads the others' buffers
directly: one copy in, one read per peer, no bytes through a socket. The group's links carry
only the small messages that order these steps.

Nothing is left in /dev/shm, even if a process is killed: a buffer's file exists only while
the group sets it up. The owner creates it (mode 0600, a random name with the ``nbdist-``
prefix every nbdist segment has), the peers map it, and once all have (the group waits for
that), the owner unlinks it; the mappings stay valid until each process unmaps them or exits.
A buffer is replaced by a larger one when a tensor does not fit, by the same steps. An
``atexit`` hook unlinks a name still present if the process exits mid set-up.
"""

from __future__ import annotations

import atexit
import mmap
import os
import secrets

import numpy as np

SHM_DIR = "/dev/shm"
_pending: set[str] = set()  # names created here and not yet unlinked


def available() -> bool:
    return os.path.isdir(SHM_DIR)


def _unlink(name: str) -> None:
    _pending.discard(name)
    try:
        os.unlink(os.path.join(SHM_DIR, name))
    except FileNotFoundError:
        pass


@atexit.register
def _unlink_pending() -> None:
    for name in list(_pending):
        _unlink(name)


class Segment:
    """A mapping of one rank's buffer, as a flat uint8 array."""

    def __init__(self, name: str, size: int, create: bool) -> None:
        path = os.path.join(SHM_DIR, name)
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        if create:
            _pending.add(name)
        fd = os.open(path, flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, size)
            self._map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self.name, self.size = name, size
        self.array = np.frombuffer(self._map, dtype=np.uint8)

    @classmethod
    def create(cls, size: int) -> Segment:
        return cls(f"nbdist-coll-{os.getpid()}-{secrets.token_hex(8)}", size, create=True)

    def unlink(self) -> None:
        _unlink(self.name)

    def close(self) -> None:
        self.unlink()
        del self.array
        try:
            self._map.close()
        except BufferError:  # a view handed out is still alive; the GC unmaps it later
            pass

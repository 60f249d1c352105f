"""Shared memory for large objects (layer L1): one arena per node, files as the fallback.

**The arena.** The node daemon creates one file per node in the shm dir (``/dev/shm``), named
by `protocol.arena_name` (session-prefixed: the node's pid, so `lifetime` sweeps and removes it
with the node's other files), sized to the store's capacity but sparse (``ftruncate``). Every
process of the node maps it once, read-write: the daemon at start-up, its forked workers by
inheriting that mapping, a driver at connect (`attach`). An object in the arena is a range
``[offset, offset + size)``; ranges are handed out by the node's object table (an `Allocator`,
below, owned by `nbdist.scheduler.objects`) and the table *commits* a range's pages
(``posix_fallocate``, by the daemon) before granting it the first time, so a write into the
mapping can never hit a full tmpfs (SIGBUS): it is refused up front and the object goes to a
file instead. Pages are never given back while the node lives, so a range reused for a later
object is already allocated and mapped in every process: a writer copies at memcpy speed
(`Arena.write`, one copy from the pickle-5 buffers) and a reader pays no ``mmap`` and no page
faults (`Arena.pinned`).

**Who may touch a range.** The writer, between its grant and its ``PUT``/``RESULT``. Readers,
through a *lease*: the node counts a lease on the range each time it sends a process a location
in the arena; the process turns it into a lease object whose death (last zero-copy view gone,
location dropped from its cache) sends ``UNPIN`` back. The table reuses a range only when no
object stores in it *and* no lease remains (see the object table for the invariant); a spilled
or freed range that readers still use lingers until they let go. `Arena.pinned` gives readers
read-only views that keep their lease alive: numpy arrays and Arrow buffers unpickled from it
are zero-copy and read-only, and hold the lease while they live.

**Files (the fallback, and what crosses nodes).** An object the arena cannot take (no arena,
too big for it, fragmented, tmpfs full) is one file per object, named by `protocol.shm_name`,
as before the arena existed: the producer writes the blob with ``os.writev`` (see `write` and
its *warm file*), a reader maps the file read-only (`map_readonly`), and the owner unlinks it
when no reference remains; mappings that readers still hold stay valid (POSIX unlink
semantics). Values received from another node and objects restored when the arena is full are
files too.

Capacity accounting and the eviction and spill policy live in the node's object table
(`nbdist.scheduler.objects`), the spill files' I/O in the node daemon (`nbdist.daemons.node`); this
module only moves bytes and does the arithmetic of ranges.
"""

from __future__ import annotations

import atexit
import bisect
import contextlib
import mmap
import os
import threading
from typing import Any

_IOV_MAX = 512
# Writing into fresh shared memory costs the kernel a page allocation per 4 KiB, which on some
# machines halves the speed of a large put. A write of at least WARM_MIN bytes therefore leaves
# a *warm file* behind: a file of the same size allocated (posix_fallocate) by a background
# thread, which the next large write of at most that size fills and renames instead of
# creating a file. One per process; removed after WARM_IDLE_S without use, at exit, and by the
# node when the process's connection ends (its name carries the node's pid and the writer's).
WARM_MIN = 16 << 20
WARM_IDLE_S = 5.0


class _Warm:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.path = ""  # ready to use: allocated, `size` bytes
        self.size = 0
        self.preparing = False
        self.used = 0  # bumps on every take: an idle timer only removes an unused file
        self.count = 0

    def take(self, base: str, size: int) -> str:
        """The ready warm file (now the caller's to fill and rename), or "" if none fits."""
        with self.lock:
            if not self.path.startswith(base + "-") or self.size < size:
                return ""
            path, self.path, self.size = self.path, "", 0
            self.used += 1
            return path

    def prepare(self, base: str, size: int) -> None:
        with self.lock:
            if self.preparing or (self.path and self.size >= size):
                return
            self.preparing = True
            self.count += 1
            path = f"{base}-{self.count}"
        threading.Thread(target=self._allocate, args=(path, size), daemon=True,
                         name="nbdist-warm-file").start()

    def _allocate(self, path: str, size: int) -> None:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            try:
                os.posix_fallocate(fd, 0, size)
            finally:
                os.close(fd)
        except OSError:  # no room: writes just go on without one
            with contextlib.suppress(OSError):
                os.unlink(path)
            with self.lock:
                self.preparing = False
            return
        with self.lock:
            old, self.path, self.size, self.preparing = self.path, path, size, False
            used = self.used
        if old:  # a smaller one
            with contextlib.suppress(OSError):
                os.unlink(old)
        timer = threading.Timer(WARM_IDLE_S, self._expire, args=(path, used))
        timer.daemon = True
        timer.start()

    def _expire(self, path: str, used: int) -> None:
        with self.lock:
            if self.path != path or self.used != used:
                return
            self.path, self.size = "", 0
        with contextlib.suppress(OSError):
            os.unlink(path)

    def remove(self) -> None:
        with self.lock:
            path, self.path, self.size = self.path, "", 0
        if path:
            with contextlib.suppress(OSError):
                os.unlink(path)


_warm = _Warm()
atexit.register(_warm.remove)


def write(path: str, parts: list[Any], size: int, warm: str = "") -> None:
    """Create ``path`` (it must not exist) holding the concatenation of ``parts``. ``warm`` is
    the name prefix of this process's warm files (see WARM_MIN); one that is ready and large
    enough is filled and renamed to ``path``."""
    if warm and size >= WARM_MIN:
        ready = _warm.take(warm, size)
        try:
            if ready:
                _fill(ready, parts, size, reuse=True)
                try:
                    os.link(ready, path)  # fails if path exists, as O_EXCL would
                finally:
                    os.unlink(ready)
            else:
                _fill(path, parts, size, reuse=False)
        finally:
            _warm.prepare(warm, size)
        return
    _fill(path, parts, size, reuse=False)


def _fill(path: str, parts: list[Any], size: int, reuse: bool) -> None:
    flags = os.O_WRONLY if reuse else os.O_CREAT | os.O_EXCL | os.O_WRONLY
    fd = os.open(path, flags, 0o600)
    try:
        if reuse:
            os.ftruncate(fd, size)
        views = [memoryview(p).cast("B") for p in parts if len(p)]
        written = 0
        while views:
            n = os.writev(fd, views[:_IOV_MAX])
            written += n
            while views and n >= views[0].nbytes:
                n -= views[0].nbytes
                views.pop(0)
            if n and views:
                views[0] = views[0][n:]
        if written != size:
            raise OSError(f"short write to {path}: {written} of {size} bytes")
    except BaseException:
        os.close(fd)
        try:
            os.unlink(path)
        except OSError:
            pass
        raise
    os.close(fd)


def map_readonly(path: str) -> memoryview:
    """A read-only memoryview over the whole file (kept mapped while the view lives)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)
    return memoryview(mm)


def unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# ---------------------------------------------------------------------------- the arena
ARENA_ALIGN = 4096  # ranges start on page boundaries: page-aligned buffers, whole pages reused


def _round(size: int) -> int:
    return max(ARENA_ALIGN, -(-size // ARENA_ALIGN) * ARENA_ALIGN)


class Allocator:
    """First-fit ranges of ``[0, size)`` with coalescing of neighbours on release. Pure
    arithmetic (no I/O): the node's object table owns one. Free ranges are kept sorted by
    offset in two parallel lists; every range is a multiple of `ARENA_ALIGN`."""

    def __init__(self, size: int) -> None:
        self.size = size - size % ARENA_ALIGN
        self.starts: list[int] = [0] if self.size else []
        self.lengths: list[int] = [self.size] if self.size else []
        self.used = 0

    def alloc(self, size: int) -> int:
        """The offset of a free range of ``size`` bytes, now taken; -1 if none is free."""
        need = _round(size)
        for i, length in enumerate(self.lengths):
            if length >= need:
                start = self.starts[i]
                if length == need:
                    del self.starts[i], self.lengths[i]
                else:
                    self.starts[i] = start + need
                    self.lengths[i] = length - need
                self.used += need
                return start
        return -1

    def release(self, offset: int, size: int) -> None:
        """Give back the range `alloc` returned for ``size`` bytes at ``offset``."""
        length = _round(size)
        starts, lengths = self.starts, self.lengths
        i = bisect.bisect_left(starts, offset)
        if offset < 0 or offset + length > self.size or (
                i < len(starts) and starts[i] < offset + length) or (
                i > 0 and starts[i - 1] + lengths[i - 1] > offset):
            raise ValueError(f"range {offset:#x}+{length:#x} is not taken (freed twice?)")
        self.used -= length
        if i > 0 and starts[i - 1] + lengths[i - 1] == offset:
            i -= 1
            lengths[i] += length
        else:
            starts.insert(i, offset)
            lengths.insert(i, length)
        if i + 1 < len(starts) and starts[i] + lengths[i] == starts[i + 1]:
            lengths[i] += lengths[i + 1]
            del starts[i + 1], lengths[i + 1]

    def free_ranges(self) -> list[tuple[int, int]]:
        return list(zip(self.starts, self.lengths, strict=True))


class Arena:
    """This process's read-write mapping of its node's arena file (see the module docstring).
    ``fd`` stays open in the daemon only (it commits pages); other processes close it."""

    def __init__(self, path: str, size: int, create: bool = False) -> None:
        size = int(size)  # init(object_store_memory=7e8) gives a float, as Ray accepts
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(path, flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, size)
            self.mm = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            if create:
                unlink(path)
            raise
        self.path = path
        self.size = size
        self.fd = fd if create else -1
        if not create:
            os.close(fd)
        self.view = memoryview(self.mm)
        self._bytes: Any = None  # numpy uint8 array over the mapping, made at the first read

    def commit(self, start: int, end: int) -> bool:
        """Allocate the file's pages of ``[start, end)`` (daemon only); False if tmpfs is full."""
        try:
            os.posix_fallocate(self.fd, start, end - start)
        except OSError:
            return False
        return True

    def write(self, offset: int, parts: list[Any], size: int) -> None:
        """Copy the concatenation of ``parts`` (``size`` bytes) to ``offset``."""
        view = self.view
        pos = offset
        for part in parts:
            data = memoryview(part).cast("B")
            n = data.nbytes
            if n:
                view[pos:pos + n] = data
                pos += n
        if pos - offset != size:
            raise ValueError(f"wrote {pos - offset} bytes into a range of {size}")

    def read(self, offset: int, size: int) -> memoryview:
        """A plain view of a range, valid only while its owner keeps the range (the daemon's
        own copies: spilling, sending to another node)."""
        return self.view[offset:offset + size]

    def pinned(self, offset: int, size: int, lease: Any) -> memoryview:
        """A read-only view of a range that keeps ``lease`` alive as long as it, or any view or
        array made from it, lives."""
        if self.view[offset] != _TAG_PICKLE:  # out-of-band buffers: views outlive the read
            if self._bytes is None:
                import numpy as np

                self._bytes = np.frombuffer(self.mm, dtype=np.uint8)
            exporter = self._bytes[offset:offset + size].view(_pinned_type())
            exporter.flags.writeable = False
            exporter.lease = lease
            return memoryview(exporter)
        return self.view[offset:offset + size].toreadonly()  # unpickling copies everything


_TAG_PICKLE = 0x50  # serialization.TAG_PICKLE: no out-of-band buffers
_Pinned: Any = None


def _pinned_type() -> Any:
    """An ndarray subclass, only so a view can carry its lease as an attribute: a memoryview
    (and so every slice and array made from it) keeps its exporter alive."""
    global _Pinned
    if _Pinned is None:
        import numpy as np

        class Pinned(np.ndarray):
            pass

        _Pinned = Pinned
    return _Pinned


_arenas: dict[str, Arena] = {}


def create_arena(path: str, size: int) -> Arena:
    """The daemon's arena (workers it forks find it here, already mapped)."""
    arena = _arenas[path] = Arena(path, size, create=True)
    return arena


def detach(path: str) -> None:
    """Forget this process's mapping of the arena at ``path`` (a driver whose cluster ended):
    the mapping and its descriptor go once no value read from it is alive (zero-copy arrays
    a user kept hold the mapping until they go)."""
    _arenas.pop(path, None)


def attach(path: str, size: int) -> Arena | None:
    """This process's mapping of the arena at ``path``, made once; None if it cannot be
    mapped (every write then goes to files)."""
    arena = _arenas.get(path)
    if arena is None or arena.size != size:
        try:
            arena = _arenas[path] = Arena(path, size)
        except OSError:
            return None
    return arena

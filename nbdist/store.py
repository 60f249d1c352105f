"""Shared-memory object files (layer L1).

One file per large object in the shm dir (``/dev/shm``), named by `protocol.shm_name`. The
producer (a driver's `put`, a worker's result) writes the serialized blob with ``os.writev``
straight from the pickle buffers (one copy: user memory -> shared memory); a reader maps the
file read-only, so out-of-band buffers deserialize as zero-copy read-only views. The node
daemon that owns the object unlinks the file when no reference remains; mappings that readers
still hold stay valid until they drop them (POSIX unlink semantics), so freeing is never unsafe.
Capacity accounting and the eviction and spill policy live in the node's object table
(`nbdist.scheduler.objects`), the spill files' I/O in the node daemon (`nbdist.node`); this
module only moves bytes.
"""

from __future__ import annotations

import atexit
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

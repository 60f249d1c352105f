"""Shared-memory object files (layer L1).

One file per large object in the shm dir (``/dev/shm``), named by `protocol.shm_name`. The
producer (a driver's `put`, a worker's result) writes the serialized blob with ``os.writev``
straight from the pickle buffers (one copy: user memory -> shared memory); a reader maps the
file read-only, so out-of-band buffers deserialize as zero-copy read-only views. The node
daemon that owns the object unlinks the file when no reference remains; mappings that readers
still hold stay valid until they drop them (POSIX unlink semantics), so freeing is never unsafe.
Capacity accounting and eviction live in the node daemon; this module only moves bytes.
"""

from __future__ import annotations

import mmap
import os
from typing import Any

_IOV_MAX = 512


def write(path: str, parts: list[Any], size: int) -> None:
    """Create ``path`` (it must not exist) holding the concatenation of ``parts``."""
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    try:
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

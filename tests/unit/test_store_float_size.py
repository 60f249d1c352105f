"""An object store size given as a float (``init(object_store_memory=7e8)``, as Ray takes it)
maps an arena of that many bytes rather than failing in ``ftruncate``."""

from __future__ import annotations

import os
from pathlib import Path

from nbdist.objects.store import Arena


def test_a_float_size_makes_an_arena_of_that_many_bytes(tmp_path: Path) -> None:
    path = str(tmp_path / "arena")
    arena = Arena(path, 1e6, create=True)  # type: ignore[arg-type]
    assert os.path.getsize(path) == 1_000_000 and len(arena.mm) == 1_000_000

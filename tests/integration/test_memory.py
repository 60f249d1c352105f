"""Memory pressure: a store smaller than the live objects spills to disk and reads back
bit-exact; a put that cannot fit even after spilling raises ObjectStoreFullError; spill files go
away with the cluster."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

import nbdist
from nbdist.exceptions import ObjectStoreFullError

pytestmark = [pytest.mark.timeout(120), pytest.mark.nbdist_only, pytest.mark.usefixtures(
    "no_cluster")]

MiB = 1 << 20


def _digest(a: np.ndarray) -> str:
    return hashlib.sha256(a.tobytes()).hexdigest()


@nbdist.remote
def make(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**62, n, dtype=np.int64)


@nbdist.remote
def digest(a: np.ndarray) -> str:
    return hashlib.sha256(a.tobytes()).hexdigest()


def _spill_files(spill: Path) -> list[Path]:
    return [p for p in spill.glob("nbdist-spill-*/*")]


def _node() -> dict:
    return nbdist.nodes()[0]


def test_three_times_the_store_in_live_objects_reads_back_bit_exact(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wait_until) -> None:
    monkeypatch.setenv("NBDIST_SPILL_DIR", str(tmp_path))
    nbdist.init(num_cpus=2, object_store_memory=48 * MiB)
    rng = np.random.default_rng(1)
    puts = [rng.integers(0, 2**62, MiB, dtype=np.int64) for _ in range(12)]  # 8 MiB each
    expected = {}
    refs = []
    for a in puts:
        ref = nbdist.put(a)
        refs.append(ref)
        expected[ref.hex()] = _digest(a)
    del puts
    made = [make.remote(100 + i, MiB) for i in range(6)]  # 8 MiB results, written by workers
    for i, ref in enumerate(made):
        expected[ref.hex()] = _digest(np.random.default_rng(100 + i).integers(
            0, 2**62, MiB, dtype=np.int64))
    refs += made
    assert len(refs) * 8 * MiB >= 3 * 48 * MiB
    # Spilled objects come back for tasks (as arguments) and for the driver.
    assert nbdist.get([digest.remote(r) for r in refs]) == [expected[r.hex()] for r in refs]
    for ref in refs:
        assert _digest(nbdist.get(ref)) == expected[ref.hex()]
    assert _spill_files(tmp_path), "the store must have spilled to disk"
    node = wait_until(lambda: _node()["ObjectStoreSpilled"] > 0 and _node(),
                      what="the node to report what it spilled")
    assert node["ObjectStoreUsed"] <= 48 * MiB
    del ref, refs, made
    wait_until(lambda: not _spill_files(tmp_path), what="spill files of freed objects removed")
    nbdist.shutdown()
    assert not list(tmp_path.glob("nbdist-spill-*")), "the spill folder goes with the node"


def test_a_put_that_cannot_fit_even_after_spilling_raises(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NBDIST_SPILL_DIR", str(tmp_path))
    monkeypatch.setenv("NBDIST_SPILL_MAX_BYTES", str(16 * MiB + 4096))
    nbdist.init(num_cpus=1, object_store_memory=32 * MiB)
    kept = []
    with pytest.raises(ObjectStoreFullError, match="spilling cannot make room"):
        for i in range(10):  # 32 MiB in memory + 16 MiB on disk hold 5 at most
            kept.append(nbdist.put(np.full(MiB, i, dtype=np.int64)))
    assert 4 <= len(kept) <= 6
    # A task whose result cannot be stored fails with the same error; its worker survives.
    with pytest.raises(ObjectStoreFullError):
        nbdist.get(make.remote(5, MiB))
    assert nbdist.get(digest.remote(np.arange(10))) == _digest(np.arange(10))
    for i, ref in enumerate(kept):
        assert (nbdist.get(ref) == i).all()
    del kept, ref
    # With room again, puts work.
    assert nbdist.get(nbdist.put(np.ones(MiB))).sum() == MiB
    with pytest.raises(ObjectStoreFullError, match="larger than the whole object store"):
        nbdist.put(np.ones(5 * MiB))

"""The node's shared-memory arena with real processes: values go through one mapped file per
node, readers keep the ranges they read from being reused, spilling and restoring work on
arena objects, what the arena cannot take becomes a file, and nothing stays in /dev/shm."""

from __future__ import annotations

import gc
import glob
import hashlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from polling import importable_env, poll

import nbdist

pytestmark = [pytest.mark.timeout(120), pytest.mark.nbdist_only, pytest.mark.usefixtures(
    "no_cluster")]

MiB = 1 << 20
ARRAY = MiB  # float64 elements: 8 MiB arrays


def _node_files(node_pid: int, warm: bool = False) -> set[str]:
    """The node's files in /dev/shm; without ``warm``, not the writers' warm files (see
    `nbdist.objects.store.write`), which come and go on their own."""
    names = {os.path.basename(p) for p in glob.glob(f"/dev/shm/nbdist-{node_pid}-*")}
    return names if warm else {n for n in names if "-warm" not in n}


def _node_pid() -> int:
    return int(nbdist.nodes()[0]["Pid"])


def _digest(a: np.ndarray) -> str:
    return hashlib.sha256(a.tobytes()).hexdigest()


@nbdist.remote
def total(a: np.ndarray) -> float:
    return float(a.sum())


@nbdist.remote
def filled(value: float, n: int) -> np.ndarray:
    return np.full(n, value)


@nbdist.remote
class Keeper:
    """Keeps the zero-copy array it was given beyond the call that gave it."""

    def __init__(self) -> None:
        self.kept: np.ndarray | None = None

    def keep(self, a: np.ndarray) -> bool:
        self.kept = a
        return bool(a.flags.writeable)

    def digest(self) -> str:
        assert self.kept is not None
        return hashlib.sha256(self.kept.tobytes()).hexdigest()


def test_values_go_through_the_arena_zero_copy_and_read_only() -> None:
    nbdist.init(num_cpus=2, object_store_memory=256 * MiB)
    node_pid = _node_pid()
    assert _node_files(node_pid) == {f"nbdist-{node_pid}-arena"}
    a = np.random.default_rng(1).random(ARRAY)
    ref = nbdist.put(a)
    first, second = nbdist.get(ref), nbdist.get(ref)
    assert np.array_equal(first, a)
    assert not first.flags.writeable and np.shares_memory(first, second)
    assert nbdist.get(total.remote(ref)) == pytest.approx(a.sum())
    made = nbdist.get(filled.remote(3.0, ARRAY))  # a worker's large result
    assert made.shape == (ARRAY,) and (made == 3.0).all() and not made.flags.writeable
    # One file for the node, whatever the number of objects: no file per object.
    assert _node_files(node_pid) == {f"nbdist-{node_pid}-arena"}


def test_a_reader_keeps_its_bytes_while_its_ref_is_dropped_and_new_values_are_put() -> None:
    nbdist.init(num_cpus=2, object_store_memory=256 * MiB)
    ref = nbdist.put(np.ones(ARRAY))
    view = nbdist.get(ref)  # zero-copy: its bytes are the arena's
    keeper = Keeper.remote()
    assert nbdist.get(keeper.keep.remote(ref)) is False  # the actor keeps a view too
    expected = _digest(np.ones(ARRAY))
    del ref
    gc.collect()
    # Values of the same size, written while nothing but the two views uses the first range:
    # reusing it would overwrite what they show.
    others = [nbdist.put(np.full(ARRAY, float(i + 2))) for i in range(4)]
    others += [filled.remote(float(i + 10), ARRAY) for i in range(4)]
    nbdist.get(others)
    assert nbdist.get(keeper.digest.remote()) == expected
    assert (view == 1.0).all()
    for i, other in enumerate(others[:4]):
        assert (nbdist.get(other) == float(i + 2)).all()


def test_dropped_refs_give_their_room_back() -> None:
    nbdist.init(num_cpus=2, object_store_memory=256 * MiB)

    def used() -> int:
        return int(nbdist.nodes()[0]["ObjectStoreUsed"])

    put_ref = nbdist.put(np.ones(ARRAY))
    made_ref = filled.remote(2.0, ARRAY)
    nbdist.get(made_ref)
    poll(lambda: used() >= 16 * MiB, what="both values counted in the store")
    del put_ref, made_ref
    gc.collect()
    poll(lambda: used() == 0, what="the store empty again")
    # Their ranges are free again: 40 more such values (320 MiB), one at a time, all fit the
    # arena (a range never given back would send the later ones to files).
    node_pid = _node_pid()
    for i in range(40):
        ref = nbdist.put(np.full(ARRAY, float(i)))
        assert nbdist.get(total.remote(ref)) == i * ARRAY
        assert _node_files(node_pid) == {f"nbdist-{node_pid}-arena"}
        del ref
    assert nbdist.nodes()[0]["ObjectStoreSpilled"] == 0


def test_arena_objects_spill_to_disk_and_read_back_bit_exact(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NBDIST_SPILL_DIR", str(tmp_path))
    nbdist.init(num_cpus=2, object_store_memory=48 * MiB)
    node_pid = _node_pid()
    rng = np.random.default_rng(2)
    refs, digests = [], []
    for _ in range(12):  # 96 MiB of live values in a 48 MiB store
        a = rng.integers(0, 2**62, ARRAY, dtype=np.int64)
        refs.append(nbdist.put(a))
        digests.append(_digest(a))
    assert list(tmp_path.glob("nbdist-spill-*/*")), "nothing was spilled"
    assert nbdist.nodes()[0]["ObjectStoreSpilled"] > 0
    for ref, digest in zip(refs, digests, strict=True):
        value = nbdist.get(ref)
        assert _digest(value) == digest and not value.flags.writeable
        del value
    # Restored by tasks too (their arguments), twice over.
    for ref, digest in zip(refs * 2, digests * 2, strict=True):
        assert nbdist.get(total.remote(ref)) == pytest.approx(
            float(nbdist.get(ref).sum()))
        assert _digest(nbdist.get(ref)) == digest
    assert f"nbdist-{node_pid}-arena" in _node_files(node_pid)


def test_an_object_larger_than_the_arena_becomes_a_file(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NBDIST_ARENA_BYTES", str(16 * MiB))
    nbdist.init(num_cpus=2, object_store_memory=256 * MiB)
    node_pid = _node_pid()
    big = np.random.default_rng(3).random(4 * ARRAY)  # 32 MiB
    big_ref = nbdist.put(big)
    files = _node_files(node_pid) - {f"nbdist-{node_pid}-arena"}
    assert files == {f"nbdist-{node_pid}-{big_ref.hex().lstrip('0')}"}
    small_ref = nbdist.put(np.ones(ARRAY))  # fits: no new file
    assert _node_files(node_pid) - {f"nbdist-{node_pid}-arena"} == files
    assert np.array_equal(nbdist.get(big_ref), big)
    assert nbdist.get(total.remote(big_ref)) == pytest.approx(big.sum())
    assert nbdist.get(total.remote(small_ref)) == float(ARRAY)
    made = nbdist.get(filled.remote(5.0, 4 * ARRAY))  # a worker's result, also too big
    assert (made == 5.0).all()
    del big_ref
    poll(lambda: _node_files(node_pid) - {f"nbdist-{node_pid}-arena"} != files,
         what="the file of the freed object is removed")


def test_nothing_is_left_in_dev_shm_after_shutdown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NBDIST_ARENA_BYTES", str(16 * MiB))
    nbdist.init(num_cpus=2, object_store_memory=256 * MiB)
    node_pid = _node_pid()
    kept = [nbdist.get(nbdist.put(np.ones(ARRAY))), nbdist.put(np.ones(4 * ARRAY))]
    assert len(_node_files(node_pid)) == 2  # the arena and the too-big object's file
    nbdist.shutdown()
    assert _node_files(node_pid, warm=True) == set()
    del kept


_DRIVER = textwrap.dedent("""
    import sys
    import numpy as np
    import nbdist

    nbdist.init(num_cpus=2, object_store_memory=256 << 20)
    view = nbdist.get(nbdist.put(np.ones(1 << 20)))
    big = nbdist.put(np.ones(4 << 20))
    print("READY", nbdist.nodes()[0]["Pid"], flush=True)
    sys.stdin.read()
""")


def test_nothing_is_left_in_dev_shm_after_the_driver_is_killed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    env = importable_env({**os.environ, "NBDIST_ARENA_BYTES": str(16 * MiB)})
    proc = subprocess.Popen([sys.executable, "-c", _DRIVER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        assert line and line[0] == "READY", line
        node_pid = int(line[1])
        assert f"nbdist-{node_pid}-arena" in _node_files(node_pid)
        assert len(_node_files(node_pid)) == 2
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        poll(lambda: not _node_files(node_pid, warm=True), timeout=30,
             what="the node's arena and object files are removed")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)

"""Objects: values round-trip, large numpy and Arrow data come back zero-copy and read-only,
and an object's shared memory goes away once no ref to it remains."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pytest

import nbdist
from nbdist.objects import store

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("cluster")]

BIG = 2_000_000  # float64 elements: 16 MB, far above any inline threshold


@nbdist.remote
def identity(x):
    return x


@nbdist.remote
def make_array(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.float64)


@nbdist.remote
def inspect_array(a: np.ndarray) -> tuple[bool, float]:
    return bool(a.flags.writeable), float(a.sum())


@pytest.fixture
def file_store(monkeypatch: pytest.MonkeyPatch, cluster_manager) -> Iterator[None]:
    """A cluster whose node has no arena: a file per large object, the path values take when
    the arena cannot (tests/integration/test_arena.py covers the arena)."""
    monkeypatch.setenv("NBDIST_ARENA_BYTES", "-1")
    cluster_manager.use({"num_cpus": 2}, fresh=True)
    yield
    cluster_manager.stop()


@pytest.mark.parametrize(
    "value",
    [None, 0, -1.5, "text", b"\x00bytes", [1, [2, 3]], {"a": (1, 2), "b": {3}}, {"k": None}],
    ids=repr,
)
def test_small_values_round_trip(value) -> None:
    assert nbdist.get(nbdist.put(value)) == value
    assert nbdist.get(identity.remote(value)) == value


def test_put_of_a_large_numpy_array_is_zero_copy_and_read_only() -> None:
    original = np.arange(BIG, dtype=np.float64)
    ref = nbdist.put(original)
    first = nbdist.get(ref)
    second = nbdist.get(ref)
    np.testing.assert_array_equal(first, original)
    assert first.flags.writeable is False
    assert np.shares_memory(first, second), "two gets of one object made two copies"
    assert not np.shares_memory(first, original)
    with pytest.raises(ValueError):
        first[0] = 1.0


def test_large_array_returned_by_a_task_is_zero_copy_and_read_only() -> None:
    ref = make_array.remote(BIG)
    first = nbdist.get(ref)
    second = nbdist.get(ref)
    assert first.shape == (BIG,) and first[-1] == BIG - 1
    assert first.flags.writeable is False
    assert np.shares_memory(first, second)


def test_large_array_argument_reaches_the_task_read_only() -> None:
    ref = nbdist.put(np.ones(BIG))
    writeable, total = nbdist.get(inspect_array.remote(ref))
    assert writeable is False
    assert total == BIG


def test_small_numpy_array_round_trips() -> None:
    small = np.arange(10, dtype=np.int32)
    back = nbdist.get(nbdist.put(small))
    np.testing.assert_array_equal(back, small)
    assert back.dtype == np.int32


def _value_buffer_address(table: pa.Table) -> int:
    return table.column("x").chunk(0).buffers()[1].address


def test_arrow_table_is_zero_copy() -> None:
    table = pa.table({"x": np.arange(BIG, dtype=np.int64), "y": np.ones(BIG)})
    ref = nbdist.put(table)
    first = nbdist.get(ref)
    second = nbdist.get(ref)
    assert first.equals(table)
    assert not first.column("x").chunk(0).buffers()[1].is_mutable
    assert _value_buffer_address(first) == _value_buffer_address(second)
    assert _value_buffer_address(first) != _value_buffer_address(table)


def test_ref_inside_another_object_keeps_it_alive() -> None:
    inner = nbdist.put(np.full(BIG, 7.0))
    outer = nbdist.put({"payload": [inner]})
    del inner
    gc.collect()
    (restored,) = nbdist.get(outer)["payload"]
    assert isinstance(restored, nbdist.ObjectRef)
    assert nbdist.get(restored)[123] == 7.0


@pytest.mark.nbdist_only
@pytest.mark.usefixtures("file_store")
def test_deleted_put_ref_frees_its_shared_memory(shm_files, wait_until) -> None:
    before = shm_files()
    ref = nbdist.put(np.ones(BIG))
    created = wait_until(lambda: shm_files() - before, what="a /dev/shm/nbdist-* file for a put")
    del ref
    gc.collect()
    wait_until(lambda: not (created & shm_files()), what=f"{sorted(created)} to be removed")


@pytest.mark.nbdist_only
@pytest.mark.usefixtures("file_store")
def test_deleted_task_result_frees_its_shared_memory(shm_files, wait_until) -> None:
    before = shm_files()
    ref = make_array.remote(BIG)
    assert nbdist.get(ref)[-1] == BIG - 1
    created = wait_until(lambda: shm_files() - before, what="a /dev/shm/nbdist-* file")
    del ref
    gc.collect()
    wait_until(lambda: not (created & shm_files()), what=f"{sorted(created)} to be removed")


@pytest.mark.nbdist_only
@pytest.mark.usefixtures("file_store")
def test_contained_ref_keeps_shared_memory_until_container_is_freed(shm_files, wait_until) -> None:
    before = shm_files()
    inner = nbdist.put(np.full(BIG, 3.0))
    inner_files = wait_until(lambda: shm_files() - before, what="the inner object's file")
    outer = nbdist.put([inner])

    # A sibling freed at the same moment shows the release of `inner` has been processed.
    before_sibling = shm_files()
    sibling = nbdist.put(np.zeros(BIG))
    sibling_files = wait_until(
        lambda: shm_files() - before_sibling, what="the sibling object's file"
    )
    del inner, sibling
    gc.collect()
    wait_until(lambda: not (sibling_files & shm_files()), what="the sibling's file to go")
    assert inner_files <= shm_files(), "an object still referenced from another was freed"

    (restored,) = nbdist.get(outer)
    assert nbdist.get(restored)[0] == 3.0
    del outer, restored
    gc.collect()
    wait_until(lambda: not (inner_files & shm_files()), what="the inner object's file to go")


def _warm_files() -> list[str]:
    import glob
    import os

    return glob.glob(f"/dev/shm/nbdist-*-warm{os.getpid()}-*")


@pytest.mark.usefixtures("file_store")
def test_large_puts_reuse_a_warm_file_and_read_back_exactly(wait_until) -> None:
    # A large put leaves a warm file (allocated in the background) that the next large put of
    # at most that size fills instead of allocating fresh shared memory; the values stay exact.
    first = np.random.default_rng(1).random(4_000_000)  # 32 MB
    ref1 = nbdist.put(first)
    # Ready once allocated (the file exists a moment earlier, while it is being allocated; a
    # put meanwhile just writes a fresh file).
    ready = wait_until(lambda: store._warm.path, timeout=30, what="a warm file, allocated")
    warm = _warm_files()
    assert warm == [ready], (warm, ready)
    second = np.random.default_rng(2).random(3_000_000)  # 24 MB: fits the 32 MB warm file
    ref2 = nbdist.put(second)
    assert not set(warm) & set(_warm_files()), "the warm file should have been used"
    assert np.array_equal(nbdist.get(ref1), first)
    got = nbdist.get(ref2)
    assert got.nbytes == second.nbytes and np.array_equal(got, second)
    assert np.array_equal(nbdist.get(identity.remote(ref2)), second)  # as a task argument
    del ref1, ref2, got
    # Unused, it goes after a few seconds (store.WARM_IDLE_S).
    wait_until(lambda: not _warm_files(), timeout=30, what="the idle warm file to go")

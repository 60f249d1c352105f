"""The shared-memory arena without processes: the range allocator (`store.Allocator`) and the
object table's grants, leases and lingering ranges (`scheduler.objects`), driven as messages in,
sends out."""

from __future__ import annotations

import random

import pytest
from test_scheduler import RecordingIO

from nbdist.objects.store import ARENA_ALIGN, Allocator
from nbdist.scheduler import Client, NodeState
from nbdist.wire import protocol as P

MiB = 1 << 20


# ---------------------------------------------------------------------------- allocator
def test_ranges_are_page_aligned_and_first_fit() -> None:
    a = Allocator(1 * MiB)
    first = a.alloc(1)
    second = a.alloc(5000)
    assert (first, second) == (0, ARENA_ALIGN)
    third = a.alloc(10)
    assert third == 3 * ARENA_ALIGN  # 5000 bytes took two pages
    a.release(first, 1)
    assert a.alloc(100) == 0  # the first hole that fits, not the end
    assert a.used == 4 * ARENA_ALIGN


def test_released_neighbours_coalesce_into_one_range() -> None:
    a = Allocator(16 * ARENA_ALIGN)
    offsets = [a.alloc(4 * ARENA_ALIGN) for _ in range(4)]
    assert offsets == [0, 4 * ARENA_ALIGN, 8 * ARENA_ALIGN, 12 * ARENA_ALIGN]
    assert a.alloc(1) == -1
    a.release(offsets[1], 4 * ARENA_ALIGN)
    a.release(offsets[3], 4 * ARENA_ALIGN)
    assert a.alloc(8 * ARENA_ALIGN) == -1  # two holes of 4 pages are not one of 8
    a.release(offsets[2], 4 * ARENA_ALIGN)  # joins both neighbours
    assert a.free_ranges() == [(4 * ARENA_ALIGN, 12 * ARENA_ALIGN)]
    a.release(offsets[0], 4 * ARENA_ALIGN)
    assert a.free_ranges() == [(0, 16 * ARENA_ALIGN)]
    assert a.used == 0
    assert a.alloc(16 * ARENA_ALIGN) == 0


def test_a_range_larger_than_the_arena_or_the_free_space_is_refused() -> None:
    a = Allocator(8 * ARENA_ALIGN)
    assert a.alloc(8 * ARENA_ALIGN + 1) == -1
    assert a.alloc(6 * ARENA_ALIGN) == 0
    assert a.alloc(3 * ARENA_ALIGN) == -1
    assert a.alloc(2 * ARENA_ALIGN) == 6 * ARENA_ALIGN


def test_releasing_a_range_twice_or_one_never_taken_raises() -> None:
    a = Allocator(8 * ARENA_ALIGN)
    x = a.alloc(ARENA_ALIGN)
    a.alloc(ARENA_ALIGN)
    a.release(x, ARENA_ALIGN)
    with pytest.raises(ValueError):
        a.release(x, ARENA_ALIGN)
    with pytest.raises(ValueError):
        a.release(4 * ARENA_ALIGN, ARENA_ALIGN)  # free space, never handed out


def test_random_allocations_never_overlap_and_all_come_back() -> None:
    rng = random.Random(7)
    size = 256 * ARENA_ALIGN
    a = Allocator(size)
    live: dict[int, int] = {}
    for _ in range(3000):
        if live and rng.random() < 0.45:
            offset = rng.choice(list(live))
            a.release(offset, live.pop(offset))
            continue
        want = rng.randint(1, 20 * ARENA_ALIGN)
        offset = a.alloc(want)
        if offset < 0:
            continue
        pages = -(-want // ARENA_ALIGN) * ARENA_ALIGN
        assert offset % ARENA_ALIGN == 0 and offset + pages <= size
        for other, n in live.items():
            other_pages = -(-n // ARENA_ALIGN) * ARENA_ALIGN
            assert offset + pages <= other or other + other_pages <= offset
        live[offset] = want
    for offset, n in live.items():
        a.release(offset, n)
    assert a.free_ranges() == [(0, size)] and a.used == 0


# ---------------------------------------------------------------------------- the table
class ArenaIO(RecordingIO):
    """A RecordingIO whose node has an arena: commits succeed unless ``tmpfs_full``."""

    def __init__(self) -> None:
        super().__init__()
        self.tmpfs_full = False
        self.commits: list[tuple[int, int]] = []
        self.restored_at: list[int] = []

    def commit_arena(self, start: int, end: int) -> bool:
        if self.tmpfs_full:
            return False
        self.commits.append((start, end))
        return True

    def spill_range(self, oid: int, offset: int, size: int) -> str | None:
        return self.spill(oid, size)

    def restore_range(self, oid: int, path: str, offset: int, size: int) -> bool:
        self.restored_at.append(offset)
        return self.restore(oid, path)


def make_node(capacity: int = 64 * MiB) -> tuple[NodeState, ArenaIO, Client, Client]:
    io = ArenaIO()
    state = NodeState(io, {"CPU": 2.0}, [], 2, 4, capacity)
    io.state = state
    state.objects.enable_arena(capacity)
    writer = Client(object(), P.KIND_DRIVER, 1, 1, 1)
    reader = Client(object(), P.KIND_DRIVER, 2, 2, 2)
    state.client_joined(writer)
    state.client_joined(reader)
    return state, io, writer, reader


def put(state: NodeState, client: Client, oid: int, size: int) -> int:
    """The writer's side of a large put: reserve (with the arena), write, PUT; the offset of
    its range, or -1 (a file)."""
    assert state.objects.reserve(client, oid, size, True) is None
    grant = client.grants.get(oid)
    offset = grant[0] if grant else -1
    state.put(client, oid, None, size, (), offset)
    return offset


def sent_locs(io: ArenaIO, client: Client) -> list[tuple]:
    return [m[1] for c, m in io.take(P.OBJ) if c is client]


def test_a_freed_range_is_reused_only_after_its_readers_let_go() -> None:
    state, io, writer, reader = make_node()
    objects = state.objects
    offset = put(state, writer, 0x10, 8 * MiB)
    state.get_request(reader, [0x10])
    (loc,) = sent_locs(io, reader)
    assert P.loc_offset(loc) == offset and loc[2] == 8 * MiB
    assert reader.leases == {offset: 1}
    objects.unpin(writer, [offset])  # the writer dropped its own location
    state.refs(writer, [(-1, 0x10)])  # ... and its ref: the object is freed
    assert 0x10 not in objects
    assert objects.lingering == {offset: 8 * MiB}
    # The reader still reads the range: a new object must go elsewhere.
    assert put(state, writer, 0x20, 8 * MiB) != offset
    objects.unpin(reader, [offset])
    assert not objects.lingering and offset not in objects.pins
    assert put(state, writer, 0x30, 8 * MiB) == offset


def test_a_range_nobody_reads_is_reused_at_once() -> None:
    state, _, writer, _ = make_node()
    offset = put(state, writer, 0x10, 8 * MiB)
    state.objects.unpin(writer, [offset])
    state.refs(writer, [(-1, 0x10)])
    assert put(state, writer, 0x20, 8 * MiB) == offset


def test_an_unpin_that_is_not_a_lease_of_the_client_changes_nothing() -> None:
    state, io, writer, reader = make_node()
    offset = put(state, writer, 0x10, 8 * MiB)
    state.objects.unpin(reader, [offset, offset])  # never sent to it
    state.refs(writer, [(-1, 0x10)])
    assert state.objects.lingering == {offset: 8 * MiB}  # the writer's lease still counts


def test_spilling_takes_objects_nobody_reads_first() -> None:
    state, io, writer, reader = make_node(capacity=32 * MiB)
    old = put(state, writer, 0x10, 12 * MiB)
    put(state, writer, 0x20, 12 * MiB)
    state.objects.unpin(writer, [old, old + 12 * MiB])  # the writer reads neither
    state.get_request(reader, [0x10])  # the oldest, but read: kept
    put(state, writer, 0x30, 12 * MiB)
    assert io.on_disk == {0x20}
    assert state.objects.by_id[0x10].offset == old


def test_a_leased_object_spilled_keeps_its_range_until_released_and_restores_elsewhere() -> None:
    state, io, writer, reader = make_node(capacity=16 * MiB)
    offset = put(state, writer, 0x10, 12 * MiB)
    # No room but the leased 0x10's: it is spilled, and its range still read, so the new
    # object is a file.
    assert put(state, writer, 0x20, 12 * MiB) == -1
    assert io.on_disk == {0x10}
    assert state.objects.lingering == {offset: 12 * MiB}
    obj = state.objects.by_id[0x10]
    assert obj.offset == -1 and obj.spilled is not None
    state.get_request(reader, [0x10])  # restored into a new range (or a file: no room)
    (loc,) = sent_locs(io, reader)
    assert P.loc_offset(loc) != offset
    state.objects.unpin(writer, [offset])
    assert offset not in state.objects.lingering


def test_a_client_that_goes_away_gives_back_its_leases_and_grants() -> None:
    state, io, writer, reader = make_node()
    offset = put(state, writer, 0x10, 8 * MiB)
    state.get_request(reader, [0x10])
    assert state.objects.reserve(reader, 0x99, 4 * MiB, True) is None
    granted = reader.grants[0x99][0]
    state.objects.unpin(writer, [offset])
    state.refs(writer, [(-1, 0x10)])
    state.client_left(reader)
    assert not state.objects.lingering and not state.objects.pins
    assert state.objects.arena is not None and state.objects.arena.used == 0
    assert state.objects.reserved_total == 0 and granted not in reader.grants


def test_when_tmpfs_cannot_commit_the_room_is_a_file() -> None:
    state, io, writer, _ = make_node()
    io.tmpfs_full = True
    assert state.objects.reserve(writer, 0x10, 8 * MiB, True) is None
    assert 0x10 not in writer.grants and 0x10 in writer.reserved


def test_a_client_without_the_arena_gets_no_range() -> None:
    state, io, writer, _ = make_node()
    assert state.objects.reserve(writer, 0x10, 8 * MiB, False) is None
    assert not writer.grants and not io.commits


def test_pages_are_committed_once_below_the_high_water_mark() -> None:
    state, io, writer, _ = make_node(capacity=512 * MiB)
    first = put(state, writer, 0x10, 100 * MiB)
    state.objects.unpin(writer, [first])
    state.refs(writer, [(-1, 0x10)])
    assert put(state, writer, 0x20, 100 * MiB) == first
    assert io.commits == [(0, 100 * MiB)]


def test_results_of_a_task_that_ended_otherwise_give_their_ranges_back() -> None:
    state, io, writer, _ = make_node()
    worker = io.spawn_worker()
    assert worker.client is not None
    worker.client.peer = object()
    assert state.objects.reserve(worker.client, 0x51, 8 * MiB, True) is None
    offset = worker.client.grants[0x51][0]
    state.result(worker, 0x50, True, [(0x51, None, 8 * MiB, (), offset)], None, 0.0, 0.0)
    assert state.objects.arena is not None and state.objects.arena.used == 0

"""The event bus: batching, history, and a slow consumer that cannot slow producers."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable

from nbdist import events


def _rec(i: int) -> events.Event:
    return events.ObjectFreed(time.time(), f"{i:x}")


def test_records_are_typed_and_versioned() -> None:
    rec = events.TaskSubmitted(1.0, "t", "f", ("d",), ("r",), None)
    assert rec.kind == "task_submitted" and rec.version == events.EVENT_VERSION


def _collector(n: int) -> tuple[Callable[[list[events.Event]], None], list[events.Event],
                                threading.Event]:
    """A subscriber callback that keeps what it gets; the event is set once ``n`` arrived."""
    got: list[events.Event] = []
    done = threading.Event()

    def cb(batch: list[events.Event]) -> None:
        got.extend(batch)
        if len(got) >= n:
            done.set()

    return cb, got, done


def test_subscriber_gets_batches_in_order() -> None:
    bus = events.EventBus()
    cb, got, done = _collector(100)
    unsub = bus.subscribe(cb)
    for i in range(100):
        bus.publish(_rec(i))
    assert done.wait(5)
    assert [e.object_id for e in got] == [f"{i:x}" for i in range(100)]  # type: ignore[attr-defined]
    unsub()
    bus.close()


def test_slow_subscriber_gets_a_drop_summary() -> None:
    bus = events.EventBus()
    got: list[events.Event] = []
    entered = threading.Event()
    gate = threading.Event()
    finished = threading.Event()

    def slow(batch: list[events.Event]) -> None:
        entered.set()
        gate.wait(10)
        got.extend(batch)
        if any(isinstance(e, events.EventsDropped) for e in batch):
            finished.set()

    bus.subscribe(slow)
    bus.publish(_rec(0))
    assert entered.wait(5)  # the dispatcher thread is now stuck in the subscriber
    n = events.MAX_BACKLOG + 500
    for i in range(n):
        bus.publish(_rec(i))
    gate.set()
    assert finished.wait(5)
    drops = [e for e in got if isinstance(e, events.EventsDropped)]
    assert sum(d.count for d in drops) == 500
    bus.close()


def test_history_is_bounded() -> None:
    bus = events.EventBus(history=10)
    for i in range(25):
        bus.publish(_rec(i))
    assert len(bus.recent()) == 10 and bus.recent(2)[-1].object_id == "18"  # type: ignore[attr-defined]


def test_deferred_records_are_built_when_read_and_keep_their_order() -> None:
    bus = events.EventBus()
    bus.publish(_rec(1))
    bus.publish_later(events.ObjectFreed, (2.0, 2))
    bus.publish(_rec(3))
    assert type(bus.recent(raw=True)[1]) is tuple  # nothing read yet: nothing built
    got = bus.recent()
    assert [e.object_id for e in got] == ["1", f"{2:018x}", "3"]  # type: ignore[attr-defined]
    assert got[1].time == 2.0

    cb, delivered, done = _collector(2)
    unsub = bus.subscribe(cb)
    bus.publish_later(events.ObjectFreed, (4.0, 4))
    bus.publish(_rec(5))
    assert done.wait(5)
    assert [type(e) for e in delivered] == [events.ObjectFreed, events.ObjectFreed]
    assert [e.object_id for e in delivered] == [f"{4:018x}", "5"]  # type: ignore[attr-defined]
    unsub()
    bus.close()


def test_records_published_compact_are_plain_values_the_same_for_every_raw_reader() -> None:
    import gc

    bus = events.EventBus()
    bus.publish_later(events.ObjectFreed, (1.0, 10))  # nobody subscribes: kept compact
    [item] = bus.recent(raw=True)
    gc.collect()
    assert not gc.is_tracked(item), "the garbage collector should stop scanning it"
    assert events.fields(item) == (events.ObjectFreed, (1.0, 10))
    assert events.build(item) == events.ObjectFreed(1.0, "00000000000000000a") == bus.recent()[0]
    got: list[object] = []
    done = threading.Event()
    unsub = bus.subscribe(lambda items: (got.extend(items), done.set()), raw=True)
    bus.publish_later(events.ObjectFreed, (2.0, 11))
    assert done.wait(5)
    assert got[0] is bus.recent(raw=True)[-1]  # a raw reader can tell it saw it already
    unsub()
    bus.close()


def _compact_sample(cls: type[events.Event]) -> tuple:
    """Fields for a record of ``cls`` in compact form: ints where ids go."""
    values: list[object] = []
    for f in dataclasses.fields(cls):
        if f.name in cls.id_fields:
            values.append((7, 8) if "s" in f.name[-1:] or f.name == "deps" else 9)
        elif f.type in ("str", "str | None"):
            values.append(f"{f.name}-text")
        elif f.type == "bool":
            values.append(True)
        elif f.type in ("int", "float"):
            values.append(3)
        elif f.type.startswith("dict"):
            values.append({"CPU": 1.0})
        else:
            values.append(None)
    return tuple(values)


def test_every_record_class_has_one_compact_form_that_builds_it_and_reads_back() -> None:
    """A node sends records compact; a consumer reads any item, built or compact, through
    `fields` the same way: the form is the record's own fields, no table per kind."""
    assert events.RECORDS, "no record class registered"
    for code, cls in enumerate(events.RECORDS):
        assert cls.code == code and cls.kind != "event"
        values = _compact_sample(cls)
        record = events.build(events.compact(cls, values))
        assert type(record) is cls and record.version == events.EVENT_VERSION
        for name in cls.id_fields:
            value = getattr(record, name)
            assert isinstance(value, (str, tuple)), (cls, name, value)
        assert events.fields(record) == (cls, values), cls
        assert events.kind_of(events.compact(cls, values)) == cls.kind


def test_the_object_store_records_carry_sizes_and_nodes() -> None:
    for cls in (events.ObjectPinned, events.ObjectSpilled, events.ObjectRestored,
                events.ObjectFreed):
        names = {f.name for f in dataclasses.fields(cls)}
        assert {"object_id", "size", "node_id"} <= names, cls
    record = events.build(events.compact(events.ObjectSpilled, (1.0, 255, 4096, "n1")))
    assert record == events.ObjectSpilled(1.0, f"{255:018x}", 4096, "n1")


def test_the_history_can_be_resized_keeping_its_newest_records() -> None:
    bus = events.EventBus(history=10)
    for i in range(10):
        bus.publish(_rec(i))
    bus.keep(4)
    assert [e.object_id for e in bus.recent()] == ["6", "7", "8", "9"]  # type: ignore[attr-defined]
    bus.keep(6)
    for i in range(10, 13):
        bus.publish(_rec(i))
    assert [e.object_id for e in bus.recent()] == [  # type: ignore[attr-defined]
        "7", "8", "9", "a", "b", "c"]


def test_subscribers_get_the_kinds_they_ask_for_and_nothing_else_is_built() -> None:
    bus = events.EventBus()
    waits, got_waits, waits_done = _collector(2)
    unsub = bus.subscribe(waits, ["wait_begun", "wait_done"])
    bus.publish_later(events.ObjectFreed, (1.0, 1))  # nobody wants it: not built, not queued
    bus.publish(events.WaitBegun(2.0, 1, "get", ("a",), 1, 0))
    bus.publish_later(events.WaitDone, (3.0, 1, 1, 1, False))
    assert waits_done.wait(5)
    assert [e.kind for e in got_waits] == ["wait_begun", "wait_done"]
    assert type(bus.recent(raw=True)[0]) is tuple
    raw: list[object] = []
    raw_done = threading.Event()

    def raw_cb(items: list[object]) -> None:
        raw.extend(items)
        raw_done.set()

    unsub_raw = bus.subscribe(raw_cb, ["object_freed"], raw=True)
    bus.publish_later(events.ObjectFreed, (4.0, 4))  # wanted, but raw: handed over compact
    assert raw_done.wait(5)
    assert raw[0] == (events.ObjectFreed.code, (4.0, 4))
    assert events.fields(raw[0]) == (events.ObjectFreed, (4.0, 4))
    freed_ids = [e.object_id for e in bus.recent() if e.kind == "object_freed"]  # type: ignore[attr-defined]
    assert freed_ids == [f"{1:018x}", f"{4:018x}"]  # built when read, in order
    unsub()
    unsub_raw()
    bus.close()


def test_a_pull_queue_keeps_its_kinds_raw_until_taken_and_says_when_it_overflowed() -> None:
    bus = events.EventBus(history=4)
    queue = bus.pull(["object_freed"])
    bus.publish_later(events.ObjectFreed, (1.0, "a"))
    bus.publish(events.WaitDone(2.0, 1, 1, 1, False))  # not its kind
    [item] = queue.take()
    assert item is bus.recent(raw=True)[0] and type(item) is tuple
    assert queue.take() == [] and not queue.overflowed
    for i in range(6):  # more than it keeps (the history's length) while nobody takes them
        bus.publish_later(events.ObjectFreed, (3.0, f"{i}"))
    assert queue.overflowed
    assert [events.build(x).object_id for x in queue.take()] == ["2", "3", "4", "5"]  # type: ignore[attr-defined]
    bus.unpull(queue)
    bus.publish_later(events.ObjectFreed, (4.0, "z"))
    assert queue.take() == []


def test_a_pull_queue_reader_is_given_a_turn_by_the_dispatcher() -> None:
    bus = events.EventBus()
    took: list[object] = []
    turned = threading.Event()

    def tick() -> None:
        took.extend(queue.take())
        if took:
            turned.set()

    queue = bus.pull(["object_freed"], on_tick=tick)
    bus.publish_later(events.ObjectFreed, (1.0, "a"))
    assert turned.wait(5), "the dispatcher thread never gave the reader its turn"
    assert [events.build(x) for x in took] == [events.ObjectFreed(1.0, "a")]
    bus.close()


def test_a_subscriber_taking_over_during_a_delivery_gets_what_was_published_meanwhile() -> None:
    """A view that narrows its kinds mid-run swaps subscriptions inside its callback: a
    record published while it ran reaches the new subscription, not nobody."""
    bus = events.EventBus()
    got: list[events.Event] = []
    swapped = threading.Event()
    subs: list[Callable[[], None]] = []

    def first(batch: list[events.Event]) -> None:
        got.extend(batch)
        if not swapped.is_set():
            bus.publish(_rec(2))  # published during this delivery
            subs.append(bus.subscribe(got.extend, pending=True))
            subs.pop(0)()
            swapped.set()

    subs.append(bus.subscribe(first))
    bus.publish(_rec(1))
    bus.flush()
    assert swapped.is_set()
    bus.flush()
    assert [e.object_id for e in got if isinstance(e, events.ObjectFreed)] == ["1", "2"]
    subs[0]()
    bus.close()

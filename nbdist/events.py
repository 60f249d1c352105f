"""The event stream: typed, versioned records of every state change (layer L0: stdlib only).

Producers (the driver runtime) call `publish(record)`: an append to a bounded deque, nothing
else, so tracing costs little on the hot path. On the hottest paths they call
`publish_later(make, args)` instead, where ``make`` is a builder with a ``kind`` (an Event class,
or a function marked with `builds`): the record is built (``make(*args)``, ids formatted) only
if a subscriber wants records of that kind, else when it is read (`recent`, or a delivery;
each read builds a new object). A single dispatcher thread, started on the first `subscribe`,
hands each subscriber the records of the kinds it asked for in batches (a list per call), at
most every ``BATCH_INTERVAL_S``; a *raw* subscriber gets the items as they were published (the
same objects as in the history: `build` makes the record, `unbuilt` gives the builder and its
arguments), so it can recognise by identity a record it already saw in `recent(raw=True)`.
A subscriber gets the records published after it subscribed; one that falls more than
``MAX_BACKLOG`` records behind gets an `EventsDropped` summary instead of the records it
missed: a slow consumer never slows the engine. A `PullQueue` (`EventBus.pull`) queues the
records of some kinds, raw, for a reader that takes them on its own schedule, with no
dispatcher thread in between (the engine's tally).

A view of thousands of tasks does not follow every task's records: it asks for `summary()`, a
`TaskSummary` folded by the engine (`nbdist.tally`) from the same stream, current as of the
call; `object_info` says what is known of some objects (for a ref shown in a notebook).

Every record is a frozen dataclass with ``kind`` (a stable string) and ``version``
(`EVENT_VERSION`, bumped when a field changes); ``time`` is ``time.time()`` on the driver or the
worker where it happened. Ids are the hex strings users see elsewhere.

    subscribe(callback, kinds=None, raw=False) -> unsubscribe
                                           callback(list[Event]) on the dispatcher thread
    recent(n=None, raw=False) -> list      the last records kept (config.event_buffer)
    summary() -> TaskSummary | None        the driver's tasks by function and submitter
    object_info(ids) -> {id: {...}}        state, size, node and task of objects
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

log = logging.getLogger(__name__)

EVENT_VERSION = 2  # 2: TaskFailed.submitter; the TaskSummary kind
BATCH_INTERVAL_S = 0.05
MAX_BACKLOG = 50_000


@dataclass(frozen=True, slots=True)
class Event:
    time: float

    kind = "event"
    version = EVENT_VERSION


@dataclass(frozen=True, slots=True)
class TaskSubmitted(Event):
    task_id: str
    name: str
    deps: tuple[str, ...]
    returns: tuple[str, ...]
    parent_task: str | None
    actor_id: str | None = None
    submitter: str | None = None  # an opaque tag of the caller (e.g. a notebook cell)
    kind = "task_submitted"


@dataclass(frozen=True, slots=True)
class TaskStarted(Event):
    task_id: str
    name: str
    node_id: str
    worker_pid: int
    kind = "task_started"


@dataclass(frozen=True, slots=True)
class TaskFinished(Event):
    task_id: str
    name: str
    duration: float
    node_id: str
    worker_pid: int
    started: float = 0.0  # when the worker began it (time.time() on the worker's machine)
    kind = "task_finished"


@dataclass(frozen=True, slots=True)
class TaskFailed(Event):
    task_id: str
    name: str
    error_type: str
    message: str
    duration: float
    worker_pid: int
    started: float = 0.0  # when the worker began it, if it ran (0.0 if it never did)
    traceback: str = ""  # the remote traceback, as the worker formatted it
    submitter: str | None = None  # as on its TaskSubmitted
    kind = "task_failed"


@dataclass(frozen=True, slots=True)
class TaskRetried(Event):
    task_id: str
    name: str
    attempt: int
    reason: str
    kind = "task_retried"


@dataclass(frozen=True, slots=True)
class ObjectCreated(Event):
    object_id: str
    size: int
    node_id: str
    owner: str
    task_id: str | None
    in_shared_memory: bool
    kind = "object_created"


@dataclass(frozen=True, slots=True)
class ObjectFreed(Event):
    object_id: str
    kind = "object_freed"


@dataclass(frozen=True, slots=True)
class WaitBegun(Event):
    wait_id: int
    call: str  # "get" or "wait"
    object_ids: tuple[str, ...]
    num_returns: int
    ready: int
    submitter: str | None = None
    kind = "wait_begun"


@dataclass(frozen=True, slots=True)
class WaitProgress(Event):
    wait_id: int
    ready: int
    total: int
    kind = "wait_progress"


@dataclass(frozen=True, slots=True)
class WaitDone(Event):
    wait_id: int
    ready: int
    total: int
    timed_out: bool
    kind = "wait_done"


@dataclass(frozen=True, slots=True)
class ActorCreated(Event):
    actor_id: str
    class_name: str
    name: str | None
    kind = "actor_created"


@dataclass(frozen=True, slots=True)
class ActorRestarted(Event):
    actor_id: str
    restarts: int
    kind = "actor_restarted"


@dataclass(frozen=True, slots=True)
class ActorDied(Event):
    actor_id: str
    reason: str
    kind = "actor_died"


@dataclass(frozen=True, slots=True)
class NodeUp(Event):
    node_id: str
    address: str
    resources: dict[str, float] = field(default_factory=dict)
    kind = "node_up"


@dataclass(frozen=True, slots=True)
class NodeDown(Event):
    node_id: str
    reason: str
    kind = "node_down"


@dataclass(frozen=True, slots=True)
class WorkerUp(Event):
    node_id: str
    worker_pid: int
    kind = "worker_up"


@dataclass(frozen=True, slots=True)
class WorkerDown(Event):
    node_id: str
    worker_pid: int
    reason: str
    kind = "worker_down"


@dataclass(frozen=True, slots=True)
class Output(Event):
    task_id: str
    name: str
    worker_pid: int
    stream: str  # "stdout" or "stderr"
    line: str
    submitter: str | None = None  # the tag of the code that submitted the (root) task
    kind = "stdout"


@dataclass(frozen=True, slots=True)
class EventsDropped(Event):
    count: int
    kind = "events_dropped"


# One group of `TaskSummary.groups`: (function name, submitter, pending, scheduled, running,
# finished, failed); pending: waiting for its arguments; scheduled: for a worker.
GroupCounts = tuple[str, "str | None", int, int, int, int, int]
# One of `TaskSummary.workers`: (node id, pid, id and name of the task it runs or None, tasks
# it ended, seconds busy, its last ended tasks as (task id, name, started, ended, failed)).
WorkerSummary = tuple[str, int, "str | None", "str | None", int, float,
                      tuple[tuple[str, str, float, float, bool], ...]]


@dataclass(frozen=True, slots=True)
class TaskSummary(Event):
    """The driver's tasks (nested ones included) folded by function and submitter, with the
    workers and nodes they ran on: what `summary()` returns. Not published."""
    groups: tuple[GroupCounts, ...]  # in order of appearance
    edges: tuple[tuple[int, int, int], ...]  # (producing group, consuming group, refs passed)
    workers: tuple[WorkerSummary, ...]
    # (node id, tasks running, live objects, their bytes, of which in shared memory)
    nodes: tuple[tuple[str, int, int, int, int], ...]
    objects_freed: int
    # The records folded in since the previous summary were all published after this (0.0:
    # none): how long the oldest news it carries had waited.
    news_since: float = 0.0
    kind = "task_summary"


Callback = Callable[[list[Event]], None]
Builder = Callable[..., Event]


# A record published unbuilt is kept as ``(builder number, arguments)``: plain values only
# (ids as ints), so the garbage collector stops scanning it after one look; a history of
# 200,000 objects cost the driver's full collections hundreds of milliseconds each.
_builders: list[Builder] = []
_codes: dict[Builder, int] = {}
_register_lock = threading.Lock()


def _code(make: Builder) -> int:
    code = _codes.get(make)
    if code is None:
        with _register_lock:
            code = _codes.get(make)
            if code is None:
                code = _codes[make] = len(_builders)
                _builders.append(make)
    return code


def builds(kind: str) -> Callable[[Builder], Builder]:
    """Mark a function as a builder of records of ``kind`` for `publish_later`."""

    def mark(fn: Builder) -> Builder:
        fn.kind = kind  # type: ignore[attr-defined]
        _code(fn)
        return fn

    return mark


def build(item: Any) -> Event:
    """The record of an item as published (a raw subscriber's): built already, or built now
    (a new object on every call)."""
    if type(item) is tuple:
        return _builders[item[0]](*item[1])
    return item


def unbuilt(item: Any) -> tuple[Builder, tuple] | None:
    """``(builder, arguments)`` of an item published unbuilt, else None."""
    if type(item) is tuple:
        return _builders[item[0]], item[1]
    return None


def kind_of(item: Any) -> str:
    """The kind of an item as published, built or not."""
    if type(item) is tuple:
        return _builders[item[0]].kind  # type: ignore[attr-defined]
    return item.kind


class Replay:
    """What a reader that began by replaying the history (raw, `recent(raw=True)`) drops when
    the same records are delivered again: recognised by identity, until the first record it
    did not replay arrives (from then on, every record is new)."""

    def __init__(self, history: list[Any] | None = None) -> None:
        # Ids identify records only while they live: the replayed ones are kept alive.
        self._keep: list[Any] = list(history or ())
        self._ids = {id(x) for x in self._keep}

    def fresh(self, items: list[Any]) -> list[Any]:
        if not self._ids:
            return items
        out = [x for x in items if id(x) not in self._ids]
        if out:
            self._ids, self._keep = set(), []
        return out


class PullQueue:
    """Records of some kinds, queued as they are published (raw), for a reader that takes
    them itself, on its own thread and schedule (`take`): no dispatcher thread is involved.
    At most ``maxlen`` wait; past that the oldest go and ``overflowed`` is set."""

    def __init__(self, kinds: Iterable[str], maxlen: int,
                 on_tick: Callable[[], None] | None = None) -> None:
        self.kinds = frozenset(kinds)
        self.maxlen = maxlen
        self.on_tick = on_tick
        self.items: collections.deque[Any] = collections.deque()
        self.overflowed = False

    def add(self, item: Any) -> None:
        if len(self.items) >= self.maxlen:
            self.overflowed = True
            self.items.popleft()
        self.items.append(item)

    def take(self) -> list[Any]:
        """The records queued so far, oldest first (appends meanwhile stay for the next)."""
        out = []
        items = self.items
        for _ in range(len(items)):
            out.append(items.popleft())
        return out


class _Sub:
    __slots__ = ("callback", "kinds", "raw", "skip")

    def __init__(self, callback: Callable[[list[Any]], None], kinds: frozenset[str] | None,
                 raw: bool) -> None:
        self.callback, self.kinds, self.raw = callback, kinds, raw
        self.skip = 0  # records waiting for delivery when it subscribed: not its own


class EventBus:
    """Bounded history plus batched delivery to subscribers (see the module docstring)."""

    def __init__(self, history: int = 200_000) -> None:
        self._history: collections.deque[Any] = collections.deque(maxlen=history)
        self._pending: collections.deque[Any] = collections.deque()
        self._dropped = 0
        self._subs: list[_Sub] = []
        self._pulls: list[PullQueue] = []
        # The kinds some subscriber wants (None: every kind), and those some subscriber wants
        # built: `publish_later` builds a record at once only in that case.
        self._wanted: frozenset[str] | None = frozenset()
        self._wanted_built: frozenset[str] | None = frozenset()
        self._lock = threading.Lock()
        # Held while a batch is taken and handed out: `flush` returning means every record
        # published before it reached the subscribers, also one the dispatcher had in hand.
        self._delivering = threading.RLock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        # When the batch being delivered was taken: every record published before then is
        # in it or in an earlier batch (a subscriber can tell how current its view is).
        self.drained_at = 0.0
        # When the batch before it was taken: every record of the batch being delivered was
        # published after this (a subscriber can tell how long its news waited).
        self.window_start = 0.0

    def keep(self, n: int) -> None:
        """Keep the last ``n`` records from now on (``config.event_buffer``; a driver sets it
        as it joins a cluster, before its records flow)."""
        n = max(1, int(n))
        with self._lock:
            if self._history.maxlen != n:
                self._history = collections.deque(self._history, maxlen=n)

    def _wants(self, kind: str) -> bool:
        wanted = self._wanted
        return wanted is None or kind in wanted

    def publish(self, event: Any) -> None:
        self._history.append(event)
        if not (self._pulls or self._subs):
            return
        kind = kind_of(event)
        for queue in self._pulls:
            if kind in queue.kinds:
                queue.add(event)
        if self._subs and self._wants(kind):
            pending = self._pending
            if len(pending) >= MAX_BACKLOG:
                # The subscribers are behind: keep the newest, count what is dropped.
                pending.popleft()
                self._dropped += 1
                for sub in self._subs:
                    sub.skip = max(0, sub.skip - 1)
            pending.append(event)

    def publish_later(self, make: Builder, args: tuple) -> None:
        """Publish the record ``make(*args)``: built at once if a subscriber wants it built,
        else when it is first read. Then the dispatcher thread, which feeds live views, has
        less to do: left to build them as well, it fell more than ``MAX_BACKLOG`` records
        behind a 100,000-task run."""
        kind = make.kind  # type: ignore[attr-defined]
        built = self._wanted_built
        if self._subs and (built is None or kind in built):
            self.publish(make(*args))
        else:
            self.publish((_code(make), args))

    def recent(self, n: int | None = None, raw: bool = False) -> list[Any]:
        items = list(self._history)
        if n is not None:
            items = items[-n:]
        return items if raw else [build(x) for x in items]

    def subscribe(self, callback: Callable[[list[Any]], None],
                  kinds: Iterable[str] | None = None, raw: bool = False
                  ) -> Callable[[], None]:
        """``callback(batch)`` from now on, with the records of ``kinds`` (None: all);
        ``raw``: items as published (see `build`, `unbuilt`)."""
        sub = _Sub(callback, None if kinds is None else frozenset(kinds), raw)
        with self._lock:
            sub.skip = len(self._pending)
            self._subs = [*self._subs, sub]
            self._refresh_wanted()
            self._start_dispatcher()

        def unsubscribe() -> None:
            with self._lock:
                self._subs = [s for s in self._subs if s is not sub]
                self._refresh_wanted()

        return unsubscribe

    def pull(self, kinds: Iterable[str], on_tick: Callable[[], None] | None = None
             ) -> PullQueue:
        """A queue of the records of ``kinds`` published from now on (see `PullQueue`);
        ``on_tick()`` is called by the dispatcher thread every ``BATCH_INTERVAL_S`` (a reader
        takes what was queued then, so little waits for its own turn)."""
        queue = PullQueue(kinds, self._history.maxlen or MAX_BACKLOG, on_tick)
        with self._lock:
            self._pulls = [*self._pulls, queue]
            self._start_dispatcher()
        return queue

    def unpull(self, queue: PullQueue) -> None:
        with self._lock:
            self._pulls = [q for q in self._pulls if q is not queue]

    def _start_dispatcher(self) -> None:
        if self._thread is None:  # (under ``_lock``)
            self._thread = threading.Thread(target=self._run, name="nbdist-events",
                                            daemon=True)
            self._thread.start()

    def _refresh_wanted(self) -> None:
        def union(subs: list[_Sub]) -> frozenset[str] | None:
            out: set[str] = set()
            for sub in subs:
                if sub.kinds is None:
                    return None
                out |= sub.kinds
            return frozenset(out)

        self._wanted = union(self._subs)
        self._wanted_built = union([s for s in self._subs if not s.raw])

    def flush(self) -> None:
        """Deliver everything published so far (on the calling thread); when it returns,
        subscribers have every record published before the call, including a batch the
        dispatcher thread was delivering meanwhile."""
        self._deliver()

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(BATCH_INTERVAL_S)
            self._deliver()
            for queue in self._pulls:
                if queue.on_tick is not None:
                    try:
                        queue.on_tick()
                    except Exception:  # a reader's bug must not stop the stream
                        log.exception("nbdist event reader %r raised", queue.on_tick)

    def _deliver(self) -> None:
        with self._delivering:
            self._deliver_batch()

    def _deliver_batch(self) -> None:
        with self._lock:
            subs = self._subs
            pending = self._pending
            items = []
            while pending:
                items.append(pending.popleft())
            dropped, self._dropped = self._dropped, 0
            self.window_start, self.drained_at = self.drained_at, time.time()
        if not items and not dropped:
            return
        built: list[Any] | None = None
        for sub in subs:
            mine: list[Any] = items
            if sub.skip:  # published before it subscribed
                mine, sub.skip = items[sub.skip:], 0
            if sub.kinds is not None:
                mine = [x for x in mine if kind_of(x) in sub.kinds]
            if not sub.raw:
                if mine is items:
                    if built is None:
                        built = [build(x) for x in items]
                    mine = built
                else:
                    mine = [build(x) for x in mine]
            if dropped:
                mine = [EventsDropped(time.time(), dropped), *mine]
            if not mine:
                continue
            try:
                sub.callback(mine)
            except Exception:  # a subscriber's bug must not stop the stream for others
                log.exception("nbdist event subscriber %r raised", sub.callback)

    def close(self) -> None:
        self._closed = True
        self._wake.set()


_bus = EventBus()

class SummarySource(Protocol):
    def summary(self) -> TaskSummary: ...
    def object_info(self, object_ids: Iterable[str]) -> dict[str, dict[str, Any]]: ...


_summary_source: SummarySource | None = None


def set_summary_source(source: SummarySource | None) -> None:
    """Where `summary` and `object_info` come from (the engine's `nbdist.tally`)."""
    global _summary_source
    _summary_source = source


def summary() -> TaskSummary | None:
    """The driver's tasks folded by function and submitter, as of now (None: no driver)."""
    source = _summary_source
    return source.summary() if source is not None else None


def object_info(object_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """What is known of these objects (hex ids): ``state`` ("pending", "scheduled",
    "running", "finished" or "failed"), ``size``, ``node``, ``task`` (its task's function)."""
    source = _summary_source
    return source.object_info(object_ids) if source is not None else {}


SubmitterFn = Callable[[], "str | None"]
OutputHandler = Callable[[list[Output]], bool]
_submitter: SubmitterFn | None = None
_output_handler: OutputHandler | None = None


def set_submitter(fn: SubmitterFn | None) -> None:
    """Tag every task, put and wait with ``fn()`` (e.g. the notebook cell running now).

    The tag appears as ``submitter`` on TaskSubmitted, WaitBegun and Output records; nested
    tasks inherit their root task's tag. ``fn`` runs on the submitting thread: keep it cheap."""
    global _submitter
    _submitter = fn


def current_submitter() -> str | None:
    fn = _submitter
    return fn() if fn is not None else None


def set_output_handler(fn: OutputHandler | None) -> None:
    """Hand remote stdout/stderr to ``fn(lines)`` (on the receiving thread, as it arrives);
    when it returns True the driver does not also print the lines itself."""
    global _output_handler
    _output_handler = fn


def output_handler() -> OutputHandler | None:
    return _output_handler


def bus() -> EventBus:
    return _bus


def subscribe(callback: Callback, kinds: Iterable[str] | None = None,
              raw: bool = False) -> Callable[[], None]:
    """Call ``callback(list_of_events)`` for every event from now on (of ``kinds``, if given:
    records of other kinds are then not even built for it; ``raw``: items as published, see
    `build`); returns unsubscribe."""
    return _bus.subscribe(callback, kinds, raw)


def recent(n: int | None = None, raw: bool = False) -> list[Any]:
    """The most recent events kept in memory (all of them when ``n`` is None); ``raw``: the
    items as published (see `build`)."""
    return _bus.recent(n, raw)


def publish(event: Event) -> None:
    _bus.publish(event)


def publish_later(make: Builder, args: tuple) -> None:
    """`publish` of ``make(*args)``, built when read (see the module docstring)."""
    _bus.publish_later(make, args)

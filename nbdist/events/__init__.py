"""The event stream: typed, versioned records of every state change (layer L0: stdlib only).

One vocabulary for every producer: the driver runtime, the node daemon (through its driver),
the Ray backend. Each record class has a ``code`` (`RECORDS`) and a *compact form*, ``(code,
fields)``: its fields in order, ids as ints. A node sends its driver records in that form (an
``EVENT`` message holds a list of them) and the driver publishes them as they come, with no
translation per kind.

Producers call `publish(record)`: an append to a bounded deque, nothing else, so tracing costs
little on the hot path. On the hottest paths they call `publish_later(cls, fields)` instead:
the compact form is kept, and the record is built (ids formatted) only if a subscriber wants
records of that kind built, else when it is read (`recent`, or a delivery; each read builds a
new object). Whether an item was kept compact or built lives inside the bus: a reader of raw
items sees both through the same two functions, `build` (the record) and `fields` (its class
and fields, ids as ints: what a fold keyed by ids reads, without building anything).

A single dispatcher thread, started on the first `subscribe`, hands each subscriber the records
of the kinds it asked for in batches (a list per call), at most every ``BATCH_INTERVAL_S``; a
*raw* subscriber gets the items as they were published (the same objects as in the history), so
it can recognise by identity a record it already saw in `recent(raw=True)` (`Replay`). A
subscriber gets the records published after it subscribed; one that falls more than
``MAX_BACKLOG`` records behind gets an `EventsDropped` summary instead of the records it
missed: a slow consumer never slows the engine. A `PullQueue` (`EventBus.pull`) queues the
records of some kinds, raw, for a reader that takes them on its own schedule, with no
dispatcher thread in between (the engine's tally).

A view of thousands of tasks does not follow every task's records: it asks for `summary()`, a
`TaskSummary` folded by the engine (`nbdist.events.tally`) from the same stream, current as of the
call; `object_info` says what is known of some objects (for a ref shown in a notebook);
`ref_counts` how many refs the driver holds to some objects. The task timeline (`executions`,
`workers`, `timeline_version`) is the engine's fold of the same stream (`nbdist.events.tracing`).

Every record is a frozen dataclass with ``kind`` (a stable string) and ``version``
(`EVENT_VERSION`, bumped when a field changes); ``time`` is ``time.time()`` on the driver, the
node or the worker where it happened. Ids are the hex strings users see elsewhere.

    task_submitted / started / finished / failed / retried      a task's life
                    (task_submitted.library_call: a library's own call, `marks`)
    object_created  (size, node, owner, task)  object_freed (size, node)
    object_pinned / object_spilled / object_restored (size, node)    the node's store
    wait_begun / wait_progress / wait_done                      get() and wait()
    actor_created / restarted / died, node_up / node_down, worker_up / worker_down
    stdout (a line of remote output), events_dropped, task_summary (not published)
    run_update (a trial's or a training worker's progress, from nbdist.tune / nbdist.train)
    task_held (a task held by step-through mode), step_mode (the mode, held count, released)
    task_paused (a task stopped in the debugger, or going on again)

    subscribe(callback, kinds=None, raw=False) -> unsubscribe
                                           callback(list[Event]) on the dispatcher thread
    recent(n=None, raw=False) -> list      the last records kept (config.event_buffer)
    build(item) / fields(item)             a raw item's record / (class, fields, int ids)
    summary() -> TaskSummary | None        the driver's tasks by function and submitter
    object_info(ids) -> {id: {...}}        state, size, node and task of objects
    ref_counts(ids) -> {id: int}           refs the driver holds
    executions(), execution_count(), workers(), timeline_version(), current_cluster(items)
                                           the task timeline (`nbdist.events.tracing`)
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from nbdist.events.fold import DepFold
from nbdist.events.marks import LibraryCall, current_library_call, library_call
from nbdist.events.records import (
    EVENT_VERSION,
    FAILED,
    FINISHED,
    RECORDS,
    RETRIED,
    RUNNING,
    ActorCreated,
    ActorDied,
    ActorRestarted,
    Compact,
    Event,
    EventsDropped,
    Execution,
    GroupCounts,
    NodeDown,
    NodeUp,
    ObjectCreated,
    ObjectFreed,
    ObjectPinned,
    ObjectRestored,
    ObjectSpilled,
    Output,
    RunUpdate,
    StepMode,
    TaskFailed,
    TaskFinished,
    TaskHeld,
    TaskPaused,
    TaskRetried,
    TaskStarted,
    TaskSubmitted,
    TaskSummary,
    WaitBegun,
    WaitDone,
    WaitProgress,
    WorkerDown,
    WorkerState,
    WorkerSummary,
    WorkerUp,
    build,
    compact,
    fields,
    kind_of,
)

__all__ = [
    "EVENT_VERSION", "FAILED", "FINISHED", "RECORDS", "RETRIED", "RUNNING", "ActorCreated", "ActorDied", "ActorRestarted", "Compact",
    "DepFold", "Event", "LibraryCall", "current_library_call", "library_call", "EventBus", "EventsDropped", "Execution", "GroupCounts", "NodeDown", "NodeUp",
    "ObjectCreated", "ObjectFreed", "ObjectPinned", "ObjectRestored", "ObjectSpilled",
    "Output", "PullQueue", "Replay", "RunUpdate", "StepMode", "TaskFailed", "TaskFinished",
    "TaskHeld", "TaskPaused", "TaskRetried",
    "TaskStarted", "TaskSubmitted", "TaskSummary", "WaitBegun", "WaitDone", "WaitProgress",
    "WorkerDown", "WorkerState", "WorkerSummary", "WorkerUp", "build", "bus", "compact",
    "current_cluster", "current_submitter", "execution_count", "executions", "fields", "kind_of", "object_info",
    "add_output_filter", "filter_output", "output_handler", "publish", "publish_later", "recent", "ref_counts", "set_output_handler",
    "set_submitter", "set_summary_source", "set_timeline_source", "subscribe", "summary",
    "timeline_version", "workers",
]

log = logging.getLogger(__name__)

BATCH_INTERVAL_S = 0.05
MAX_BACKLOG = 50_000


Callback = Callable[[list[Event]], None]


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

    def publish_later(self, cls: type[Event], values: tuple) -> None:
        """Publish the record ``cls`` with ``values`` (its fields in order, ids as ints):
        built at once if a subscriber wants it built, else kept compact and built when first
        read. Then the dispatcher thread, which feeds live views, has less to do: left to
        build them as well, it fell more than ``MAX_BACKLOG`` records behind a 100,000-task
        run."""
        built = self._wanted_built
        if self._subs and (built is None or cls.kind in built):
            self.publish(build((cls.code, values)))
        else:
            self.publish((cls.code, values))

    def recent(self, n: int | None = None, raw: bool = False) -> list[Any]:
        items = list(self._history)
        if n is not None:
            items = items[-n:]
        return items if raw else [build(x) for x in items]

    def subscribe(self, callback: Callable[[list[Any]], None],
                  kinds: Iterable[str] | None = None, raw: bool = False,
                  pending: bool = False) -> Callable[[], None]:
        """``callback(batch)`` from now on, with the records of ``kinds`` (None: all);
        ``raw``: items as published (see `build`, `fields`). ``pending``: also the records
        published before now that no batch has handed out yet: for a subscriber that takes
        over from another one during a delivery to it (no batch goes out until that returns,
        so the one it replaces never sees them)."""
        sub = _Sub(callback, None if kinds is None else frozenset(kinds), raw)
        with self._lock:
            sub.skip = 0 if pending else len(self._pending)
            self._subs = [*self._subs, sub]
            self._refresh_wanted()
            self._start_dispatcher()

        def unsubscribe() -> None:
            with self._lock:
                self._subs = [s for s in self._subs if s is not sub]
                self._refresh_wanted()

        return unsubscribe

    def pull(self, kinds: Iterable[str], on_tick: Callable[[], None] | None = None,
             queue: PullQueue | None = None) -> PullQueue:
        """A queue of the records of ``kinds`` published from now on (see `PullQueue`);
        ``on_tick()`` is called by the dispatcher thread every ``BATCH_INTERVAL_S`` (a reader
        takes what was queued then, so little waits for its own turn). A ``queue`` of the
        caller's own (a `PullQueue` whose ``add`` wakes its reader) starts no dispatcher."""
        own = queue is None
        if queue is None:
            queue = PullQueue(kinds, self._history.maxlen or MAX_BACKLOG, on_tick)
        with self._lock:
            self._pulls = [*self._pulls, queue]
            if own:
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
    def ref_counts(self, object_ids: Iterable[str]) -> dict[str, int]: ...


class TimelineSource(Protocol):
    def executions(self, include_running: bool, last: int | None) -> list[Execution]: ...
    def count(self, include_running: bool) -> int: ...
    def workers(self) -> list[WorkerState]: ...
    def version(self) -> int: ...
    def current_cluster(self, items: list[Any]) -> list[Any]: ...


_summary_source: SummarySource | None = None


_timeline_source: TimelineSource | None = None


def set_summary_source(source: SummarySource | None) -> None:
    """Where `summary`, `object_info` and `ref_counts` come from (the engine's
    `nbdist.events.tally`)."""
    global _summary_source
    _summary_source = source


def set_timeline_source(source: TimelineSource | None) -> None:
    """Where `executions`, `workers`, `timeline_version` and `current_cluster` come from (the
    engine's `nbdist.events.tracing`)."""
    global _timeline_source
    _timeline_source = source


def summary() -> TaskSummary | None:
    """The driver's tasks folded by function and submitter, as of now (None: no driver)."""
    source = _summary_source
    return source.summary() if source is not None else None


def object_info(object_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """What is known of these objects (hex ids): ``state`` ("pending", "scheduled",
    "running", "finished" or "failed"), ``size``, ``node``, ``task`` (its task's function),
    ``spilled`` (True while its node has it on disk)."""
    source = _summary_source
    return source.object_info(object_ids) if source is not None else {}


def ref_counts(object_ids: Iterable[str]) -> dict[str, int]:
    """How many refs the driver holds to each of these objects (hex ids; empty without a
    driver)."""
    source = _summary_source
    return source.ref_counts(object_ids) if source is not None else {}


def executions(include_running: bool = False, last: int | None = None) -> list[Execution]:
    """The task executions of this cluster, oldest first (plus the running ones, if asked;
    only the ``last`` ones of each, if given)."""
    source = _timeline_source
    return source.executions(include_running, last) if source is not None else []


def execution_count(include_running: bool = False) -> int:
    """How many executions `executions` has (without copying them)."""
    source = _timeline_source
    return source.count(include_running) if source is not None else 0


def workers() -> list[WorkerState]:
    """Every worker of this cluster seen in the stream, with the task it runs now."""
    source = _timeline_source
    return source.workers() if source is not None else []


def timeline_version() -> int:
    """A number that moves whenever the executions or workers change (cheap to ask)."""
    source = _timeline_source
    return source.version() if source is not None else 0


def current_cluster(items: list[Any]) -> list[Any]:
    """The tail of ``items`` (as `recent` returns them, raw or not) published since the
    current cluster started (or the last one, without a cluster)."""
    source = _timeline_source
    return source.current_cluster(items) if source is not None else list(items)


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


OutputFilter = Callable[[list[Output]], list[Output]]
_output_filters: list[OutputFilter] = []


def add_output_filter(fn: OutputFilter, first: bool = False) -> Callable[[], None]:
    """Let ``fn(lines)`` take remote lines out (it returns the rest) before the output handler
    or the driver sees them (before the other filters too, if ``first``); returns a function
    that removes it. Filters are kept apart from the handler so that whoever sets a handler
    later (a notebook loading, a test) keeps them: lines meant for a program (e.g. tqdm_ray's
    bar updates) never show as text."""
    if first:
        _output_filters.insert(0, fn)
    else:
        _output_filters.append(fn)

    def remove() -> None:
        if fn in _output_filters:
            _output_filters.remove(fn)

    return remove


def filter_output(lines: list[Output]) -> list[Output]:
    """``lines`` less those the output filters took."""
    for fn in list(_output_filters):
        if not lines:
            break
        try:
            lines = fn(lines)
        except Exception:
            log.exception("nbdist output filter failed")
    return lines


def bus() -> EventBus:
    return _bus


def subscribe(callback: Callback, kinds: Iterable[str] | None = None,
              raw: bool = False, pending: bool = False) -> Callable[[], None]:
    """Call ``callback(list_of_events)`` for every event from now on (of ``kinds``, if given:
    records of other kinds are then not even built for it; ``raw``: items as published, see
    `build`; ``pending``: see `EventBus.subscribe`); returns unsubscribe."""
    return _bus.subscribe(callback, kinds, raw, pending)


def recent(n: int | None = None, raw: bool = False) -> list[Any]:
    """The most recent events kept in memory (all of them when ``n`` is None); ``raw``: the
    items as published (see `build`)."""
    return _bus.recent(n, raw)


def publish(event: Event) -> None:
    _bus.publish(event)


def publish_later(cls: type[Event], values: tuple) -> None:
    """`publish` of the record ``cls`` with ``values`` (ids as ints), built when read (see the
    module docstring)."""
    _bus.publish_later(cls, values)

"""The event stream: typed, versioned records of every state change (layer L0: stdlib only).

Producers (the driver runtime) call `publish(record)`: an append to a bounded deque, nothing
else, so tracing costs little on the hot path. On the hottest paths they call
`publish_later(make, args)` instead: with no subscriber the record is built (``make(*args)``,
ids formatted) only when `recent` reads it, off the caller's critical path. A single
dispatcher thread, started on the first `subscribe`, hands each subscriber the records in
batches (a list per call), at most every ``BATCH_INTERVAL_S``. A subscriber that falls more
than ``MAX_BACKLOG`` records behind gets an `EventsDropped` summary instead of the records it
missed: a slow consumer never slows the engine.

Every record is a frozen dataclass with ``kind`` (a stable string) and ``version``
(`EVENT_VERSION`, bumped when a field changes); ``time`` is ``time.time()`` on the driver or the
worker where it happened. Ids are the hex strings users see elsewhere.

    subscribe(callback) -> unsubscribe     callback(list[Event]) on the dispatcher thread
    recent(n=None) -> list[Event]          the last records kept (config.event_buffer)
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

EVENT_VERSION = 1
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


Callback = Callable[[list[Event]], None]


class Deferred:
    """A record not built yet: ``make(*args)``, built once, on the first read (so every
    reader, `recent` and subscribers alike, gets the same object: readers that see a record
    twice around subscribing recognise it by identity)."""

    __slots__ = ("make", "args", "event")

    def __init__(self, make: Callable[..., Event], args: tuple) -> None:
        self.make = make
        self.args = args
        self.event: Event | None = None

    def build(self) -> Event:
        event = self.event
        if event is None:
            with _build_lock:  # two readers at once still get one object
                event = self.event
                if event is None:
                    event = self.event = self.make(*self.args)
                    self.args = ()
        return event


_build_lock = threading.Lock()


def _built(item: Event | Deferred) -> Event:
    return item if isinstance(item, Event) else item.build()


class EventBus:
    """Bounded history plus batched delivery to subscribers (see the module docstring)."""

    def __init__(self, history: int = 200_000) -> None:
        self._history: collections.deque[Event | Deferred] = collections.deque(maxlen=history)
        self._pending: collections.deque[Event | Deferred] = collections.deque()
        self._dropped = 0
        self._subs: list[Callback] = []
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

    def keep(self, n: int) -> None:
        """Keep the last ``n`` records from now on (``config.event_buffer``; a driver sets it
        as it joins a cluster, before its records flow)."""
        n = max(1, int(n))
        with self._lock:
            if self._history.maxlen != n:
                self._history = collections.deque(self._history, maxlen=n)

    def publish(self, event: Event | Deferred) -> None:
        self._history.append(event)
        if self._subs:
            pending = self._pending
            if len(pending) >= MAX_BACKLOG:
                # The subscribers are behind: keep the newest, count what is dropped.
                pending.popleft()
                self._dropped += 1
            pending.append(event)

    def publish_later(self, make: Callable[..., Event], args: tuple) -> None:
        """Publish the record ``make(*args)``: built when it is read, or now if anyone
        subscribes. Then the dispatcher thread, which feeds live views, has less to do: left
        to build them as well, it fell more than ``MAX_BACKLOG`` records behind a
        100,000-task run."""
        self.publish(make(*args) if self._subs else Deferred(make, args))

    def recent(self, n: int | None = None) -> list[Event]:
        items = list(self._history)
        return [_built(x) for x in (items if n is None else items[-n:])]

    def subscribe(self, callback: Callback) -> Callable[[], None]:
        with self._lock:
            self._subs.append(callback)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="nbdist-events", daemon=True
                )
                self._thread.start()

        def unsubscribe() -> None:
            with self._lock, contextlib.suppress(ValueError):
                self._subs.remove(callback)

        return unsubscribe

    def flush(self) -> None:
        """Deliver everything published so far (on the calling thread); when it returns,
        subscribers have every record published before the call, including a batch the
        dispatcher thread was delivering meanwhile."""
        self._deliver()

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(BATCH_INTERVAL_S)
            self._deliver()

    def _deliver(self) -> None:
        with self._delivering:
            self._deliver_batch()

    def _deliver_batch(self) -> None:
        with self._lock:
            subs = list(self._subs)
            pending = self._pending
            items = []
            while pending:
                items.append(pending.popleft())
            dropped, self._dropped = self._dropped, 0
            self.drained_at = time.time()
        batch = [_built(x) for x in items]
        if dropped:
            batch.insert(0, EventsDropped(time.time(), dropped))
        if not batch:
            return
        for callback in subs:
            try:
                callback(batch)
            except Exception:  # a subscriber's bug must not stop the stream for others
                log.exception("nbdist event subscriber %r raised", callback)

    def close(self) -> None:
        self._closed = True
        self._wake.set()


_bus = EventBus()

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


def subscribe(callback: Callback) -> Callable[[], None]:
    """Call ``callback(list_of_events)`` for every event from now on; returns unsubscribe."""
    return _bus.subscribe(callback)


def recent(n: int | None = None) -> list[Event]:
    """The most recent events kept in memory (all of them when ``n`` is None)."""
    return _bus.recent(n)


def publish(event: Event) -> None:
    _bus.publish(event)


def publish_later(make: Callable[..., Event], args: tuple) -> None:
    """`publish` of ``make(*args)``, built when read (see the module docstring)."""
    _bus.publish_later(make, args)

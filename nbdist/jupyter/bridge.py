"""The kernel side of the panel's comm: target "nbdist", a snapshot on open, then deltas.

    nbdist.events ──batches──▶ Hub.on_events ──▶ Model (model.py)
    sender thread, every INTERVAL_S (half that once grouped; and the dispatcher thread)
        ──▶ Model.take_delta() ──comm_msg──▶ every open comm
    frontend: comm_open {"schema": N} ──▶ snapshot (or an error if N differs)
              {"type": "request_snapshot"} ──▶ snapshot

Threads: the comm callbacks (open, message, close) run on the kernel's shell thread; records
arrive on nbdist's event dispatcher thread; deltas leave from our sender thread (ipykernel's
iopub socket may be written from any thread), and also from the dispatcher thread: it applies
records ``CHUNK`` at a time and after each chunk sends a delta itself when one is due
(``interval`` passed, or ``BIG_DELTA`` records changed). A busy run thus keeps the panel's
cadence and its messages small: a delta neither waits for a whole backlog to be applied nor
for the sender thread's next turn. The sender thread covers the rest (the cluster flag, node
descriptions, the driver's ref counts, and changes when no records arrive); its cadence counts
from the last delta either thread sent, and it asks the cluster for node descriptions only
after sending, so a busy node never holds a delta back. While tasks arrive in a
burst (``BURST_TASKS`` or more in one batch), deltas wait (``BURST_HOLD_S`` past the last such
batch, ``BURST_MAX_S`` at most): a burst on its way past the grouping threshold then reaches
the panel as groups, instead of as messages of a thousand single tasks each that the kernel,
the server and the page would serialize, lay out and drop again. Before each of its deltas the
sender thread delivers what the event stream still holds, so the delta carries as ``as_of``
the time that began (every record published before it is in it), and as ``news_since`` when
the oldest news in it was published, at the earliest (docs/comm-protocol.md).

Once the model is grouped, the hub stops following every task's records (it subscribes again
to the kinds the model still follows, so the others are not even built for it), and only the
sender thread sends: before each delta it reads the engine's `events.summary()`, which folds
everything published until then. Deltas then go every ``grouped_interval`` (half of
``interval``): their size no longer grows with the run, and the cadence was the larger part of
how far the view was behind the kernel.

``_model_lock`` guards the model; ``_send_lock`` guards the list of comms and orders messages,
so a comm never receives a delta taken before the snapshot it was just sent (a later delta only
repeats changes, which is harmless: deltas carry full records).

Whether a cluster runs is not an event: the sender thread asks ``nbdist.is_initialized()`` each
interval (a flag read) so the panel can tell "no cluster yet" from "an idle cluster". As it
delivers what the event stream holds first, the records published before the cluster went (a
`put` just before `shutdown()`) reach the panel ahead of the news; the dispatcher thread may
raise the flag, never lower it.

The driver publishes NodeUp for its own node only, so the sender thread asks ``nbdist.nodes()``
(once per node) about other nodes the model learnt from task records. Objects spilled to disk
and read back come as records (ObjectSpilled, ObjectRestored); the driver's ref counts of the
objects listed are read with each delta (`events.ref_counts`). The application metrics
(`nbdist.util.metrics.snapshot()`) and the placement groups (`placement_group_table()`) are
state kept in the cluster, not records: the sender thread reads them every ``APP_STATE_S``,
after its delta, and a change goes whole into the next one. The hub reads nothing else of the
engine: `nbdist.events` and the public API only.

One subscription and one sender thread serve all open comms; both start with the first comm
and stop with the last. The subscription is raw (`events.subscribe`): on subscribing, the hub
replays ``events.recent(raw=True)`` so a panel opened late still sees the work submitted
before it, and the records delivered again around that moment are the same objects: an
`events.Replay` recognises and skips them.

The message schema (``model.SCHEMA_VERSION``) is documented in ``docs/comm-protocol.md``.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import nbdist
from nbdist import events
from nbdist.jupyter import schema
from nbdist.jupyter.model import SCHEMA_VERSION, Json, Model

__all__ = ["SCHEMA_VERSION", "TARGET", "register", "unregister"]

log = logging.getLogger(__name__)

TARGET = "nbdist"
INTERVAL_S = 0.1  # ~10 deltas a second (sooner only for BIG_DELTA before grouping)
# Grouped, deltas go twice as often (~20 a second): each is bounded by the number of groups
# (about a kilobyte), and the cadence was the larger part of how far the view was behind.
GROUPED_SHARE = 0.5
CHUNK = 500  # records applied per hold of the model lock (a few ms: a delta never waits long)
BIG_DELTA = 400  # task and object records changed since the last delta: the next is due now
BURST_TASKS = 200  # tasks submitted in one batch (every 50 ms): a burst
BURST_HOLD_S = 0.15  # no delta before this long after the last burst batch ...
BURST_MAX_S = 1.0  # ... unless the holding began this long ago
# How often the sender thread reads the application metrics and placement groups: they are
# not events but state kept in the cluster (an actor, the head), one round trip each.
APP_STATE_S = 0.5
NODE_STATE_S = 1.0  # how often the nodes shown up are checked (a node lost is no record)
MAX_PLACEMENT_GROUPS = 50


def error_message(message: str) -> Json:
    return {"schema": SCHEMA_VERSION, "type": "error", "message": message}


class Hub:
    """The shared subscription, model and sender thread behind every open comm."""

    def __init__(self, interval: float = INTERVAL_S, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        """``clock``: wall-clock time, as records carry it (``as_of``); ``monotonic``: what
        the cadence, the burst hold and the sender thread's waits are measured with."""
        self.interval = interval
        self._clock = clock
        self._monotonic = monotonic
        self.grouped_interval = interval * GROUPED_SHARE
        self._model_lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._comms: list[Any] = []
        self._model = Model(clock=self._clock)
        # Where grouped deltas take their counts from (a test gives its own).
        self.summary: Callable[[], events.TaskSummary | None] = events.summary
        self._unsubscribe: Callable[[], None] | None = None
        self._following: frozenset[str] = frozenset()
        self._replay = events.Replay()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nodes_asked: set[str] = set()
        self._app_read_at = -APP_STATE_S  # monotonic time the metrics were last read
        self._machinery = Machinery()
        self._sent_at = 0.0  # monotonic time of the last delta taken
        # No delta before this (monotonic) time while not grouped: a burst is arriving; and
        # when the holding began.
        self._hold_until = 0.0
        self._hold_since = 0.0
        # Every record published before this time is in the model (see ``as_of`` in
        # docs/comm-protocol.md): the drain time of the last batch applied in full.
        self._as_of = 0.0
        # The records applied since the last delta were published after this (0.0: none).
        self._news_since = 0.0

    @property
    def subscribed(self) -> bool:
        """Whether the hub follows the event stream (true while any comm is open)."""
        return self._unsubscribe is not None

    # ------------------------------------------------------------ comm callbacks (shell)
    def open(self, comm: Any, msg: dict[str, Any]) -> None:
        data = msg.get("content", {}).get("data") or {}
        schema = data.get("schema") if isinstance(data, dict) else None
        if schema != SCHEMA_VERSION:
            comm.send(error_message(
                f"The nbdist panel speaks comm schema {schema!r} but this kernel's nbdist "
                f"speaks schema {SCHEMA_VERSION}. Install the same nbdist version in the "
                "kernel's environment and in JupyterLab, then reload the page."))
            comm.close()
            return
        comm.on_msg(lambda m: self.message(comm, m))
        comm.on_close(lambda m: self.close(comm))
        if self._unsubscribe is None:
            self._subscribe()
        with self._send_lock:
            comm.send(self._snapshot())
            self._comms.append(comm)

    def message(self, comm: Any, msg: dict[str, Any]) -> None:
        data = msg.get("content", {}).get("data") or {}
        kind = data.get("type") if isinstance(data, dict) else None
        if kind == "request_snapshot":
            with self._send_lock:
                comm.send(self._snapshot())
        else:
            comm.send(error_message(
                f"Unknown message type {kind!r}: the kernel understands 'request_snapshot'."))

    # ------------------------------------------------------------ other clients
    def attach(self, client: Any) -> None:
        """Serve ``client`` (anything with ``send(message)`` and ``comm_id``, e.g. the inline
        widget, `nbdist.jupyter.widget`) as an open comm: a snapshot now, then the deltas."""
        if self._unsubscribe is None:
            self._subscribe()
        with self._send_lock:
            client.send(self._snapshot())
            if client not in self._comms:
                self._comms.append(client)

    def resend(self, client: Any) -> None:
        """A fresh snapshot to an attached client (its view asked, e.g. a new view)."""
        with self._send_lock:
            if client in self._comms:
                client.send(self._snapshot())

    def snapshot(self) -> schema.Snapshot:
        """The state now (for a static rendering); follows the stream if nothing does yet."""
        if self._unsubscribe is None:
            with self._model_lock:
                self._model = Model(clock=self._clock)
                self._model.apply([events.build(x) for x in events.recent(raw=True)
                                   if events.kind_of(x) in self._model.kinds()])
        return self._snapshot()

    def close(self, comm: Any) -> None:
        with self._send_lock:
            if comm in self._comms:
                self._comms.remove(comm)
            last = not self._comms
        if last:
            self._shut()

    # ------------------------------------------------------------ events (dispatcher thread)
    def on_events(self, items: list[Any]) -> None:
        """Records as published (a raw subscription: the same objects as in the history, so
        those replayed when it began are recognised by identity); built here."""
        with self._model_lock:
            items = self._replay.fresh(items)
            kinds = self._model.kinds()
        batch = [events.build(x) for x in items if events.kind_of(x) in kinds]
        with self._model_lock:
            batch = self._machinery.keep(batch)
        if batch and not self._news_since:
            self._news_since = events.bus().window_start
        if self._model.grouped:  # the records the model still follows: few; no delta here
            with self._model_lock:
                self._model.apply(batch)
            return
        drained_at = events.bus().drained_at
        if sum(type(e) is events.TaskSubmitted for e in batch) >= BURST_TASKS:
            now = self._monotonic()
            # A new holding begins only once a delta went out since the last began: a burst
            # whose batches keep coming holds the panel BURST_MAX_S at most, not for good.
            if now >= self._hold_until and self._sent_at >= self._hold_since:
                self._hold_since = now
            if now - self._hold_since < BURST_MAX_S:
                self._hold_until = now + BURST_HOLD_S
        for start in range(0, len(batch), CHUNK):
            with self._model_lock:
                self._model.apply(batch[start:start + CHUNK])
                if start + CHUNK >= len(batch):
                    self._as_of = drained_at  # the whole batch is in the model now
                big = self._model.changed_tasks() >= BIG_DELTA
            if self._model.grouped:
                # Of the rest, the records it still follows (a wait's, an actor's) count.
                with self._model_lock:
                    kinds = self._model.kinds()
                    self._model.apply([e for e in batch[start + CHUNK:] if e.kind in kinds])
                    self._as_of = drained_at
                break
            if big or self._monotonic() - self._sent_at >= self.interval:
                # Only the sender thread lowers the cluster flag (see `flush`).
                self._send_delta(wait=False, cluster=True if nbdist.is_initialized() else None)
        if self._model.grouped:
            self._follow()

    # ------------------------------------------------------------ lifecycle
    def _subscribe(self) -> None:
        with self._model_lock:
            self._model = Model(clock=self._clock)
            self._nodes_asked = set()
            self._unsubscribe = events.subscribe(self.on_events, raw=True)
            self._following = self._model.kinds()
            as_of = self._clock()
            history = events.recent(raw=True)
            self._replay = events.Replay(history)
            self._machinery = Machinery()
            for start in range(0, len(history), CHUNK):
                # Built a chunk at a time: once grouped, the model follows fewer kinds.
                kinds = self._model.kinds()
                self._model.apply(self._machinery.keep(
                    [events.build(x) for x in history[start:start + CHUNK]
                     if events.kind_of(x) in kinds]))
            self._as_of = as_of
        self._follow()
        # The engine's tally follows from now on, so it is current when the model groups.
        self.summary()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nbdist-comm-bridge",
                                        daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        """Subscribe to the kinds the model follows now, if they changed (it got grouped)."""
        with self._model_lock:
            kinds = self._model.kinds()
            if self._unsubscribe is None or kinds == self._following:
                return
            # The new subscription first, taking the records not yet handed out (published
            # while this batch is applied: a get's wait_begun right after its burst): a record
            # reaches the model (perhaps twice, which it takes as once), never zero times.
            old, self._unsubscribe = self._unsubscribe, events.subscribe(
                self.on_events, kinds, raw=True, pending=True)
            old()
            self._following = kinds

    def _shut(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(5)
        self._replay = events.Replay()

    def _snapshot(self) -> schema.Snapshot:
        summary = self.summary() if self._model.grouped else None
        with self._model_lock:
            if summary is not None:
                self._model.apply_summary(summary)
            self._model.set_cluster(nbdist.is_initialized())
            return self._model.snapshot()

    # ------------------------------------------------------------ sender thread
    def _run(self) -> None:
        while True:
            # The next delta is due a cadence after the last one, whichever thread sent it:
            # the cadence does not stretch by the time a flush takes.
            cadence = self._cadence()
            due = self._sent_at + cadence - self._monotonic()
            if self._stop.wait(min(cadence, max(0.01, due))):
                return
            try:
                # The event thread may have sent one meanwhile: then wait for the next.
                self.flush(only_if_due=True)
            except Exception:  # a bug here must not end the panel's updates for good
                log.exception("nbdist comm bridge failed to send a delta")

    def flush(self, only_if_due: bool = False) -> None:
        """Send the changes since the last delta to every open comm (if anything changed)."""
        if not self._comms:
            return
        up = nbdist.is_initialized()
        if not only_if_due or self._monotonic() - self._sent_at >= self._cadence() * 0.9:
            # Everything published until now goes in (grouped, the records the model still
            # follows; the summary folds the rest): the delta is as of now, also when nothing
            # was published for a while, and the last records of a cluster that just went (a
            # put, a task's end) reach the panel before the news that it stopped.
            now = self._clock()
            events.bus().flush()
            self._send_delta(wait=True, cluster=up, as_of=now)
        # Round trips to the cluster come after the delta, so a busy node does not hold it;
        # what they learn goes into the next one.
        self._describe_nodes()
        self._check_nodes()
        self._read_app_state()

    def _cadence(self) -> float:
        """Seconds between deltas: shorter once grouped (see ``GROUPED_SHARE``)."""
        return self.grouped_interval if self._model.grouped else self.interval

    def _send_delta(self, wait: bool, cluster: bool | None, as_of: float = 0.0) -> None:
        """Take a delta and send it (``wait=False``: unless another thread is sending one);
        ``cluster``: whether the kernel has a cluster now (None: leave the flag as it is);
        ``as_of``: every record published before it is in the model (0: not known)."""
        if not self._send_lock.acquire(blocking=wait):
            return
        try:
            if not self._comms:
                return
            # Grouped: the engine's tally, as of the call.
            summary = self.summary() if self._model.grouped else None
            if not self._model.grouped and self._monotonic() < self._hold_until:
                return  # a burst is arriving (see the module docstring)
            with self._model_lock:
                if summary is not None:
                    self._model.apply_summary(summary)
                self._as_of = max(self._as_of, as_of)
                if cluster is not None:
                    self._model.set_cluster(cluster)
                self._model.ref_counts = events.ref_counts
                delta = self._model.take_delta()
                self._sent_at = self._monotonic()
                news = [t for t in (self._news_since, summary.news_since if summary else 0.0)
                        if t]
                self._news_since = 0.0
            if delta is None:
                return
            delta["as_of"] = round(self._as_of, 3)
            if news:
                delta["news_since"] = round(min(news), 3)
            for comm in list(self._comms):
                try:
                    comm.send(delta)
                except Exception:
                    log.exception("nbdist comm %s failed; dropping it", comm.comm_id)
                    self._comms.remove(comm)
        finally:
            self._send_lock.release()

    def _describe_nodes(self) -> None:
        with self._model_lock:
            unknown = set(self._model.nodes_without_info()) - self._nodes_asked
        if not unknown or not nbdist.is_initialized():
            return
        self._nodes_asked |= unknown
        try:
            listed = nbdist.nodes()
        except Exception:  # the cluster may be going away; the node just stays undescribed
            log.debug("nbdist.nodes() failed", exc_info=True)
            return
        records = [events.NodeUp(self._clock(), n["NodeID"], str(n["NodeManagerAddress"]),
                                 dict(n["Resources"]))
                   for n in listed if n["NodeID"] in unknown]
        with self._model_lock:
            self._model.apply(records)


    def _check_nodes(self) -> None:
        """A node lost later (its machine powered off, its network gone) is no record the
        driver receives: every ``NODE_STATE_S`` the nodes the panel shows up are looked up
        with ``nbdist.nodes()``, and those the cluster lists as dead go down."""
        if not nbdist.is_initialized() or (
                self._monotonic() - self._nodes_read_at < NODE_STATE_S):
            return
        self._nodes_read_at = self._monotonic()
        with self._model_lock:
            shown = self._model.nodes_up()
        if not shown:
            return
        try:
            listed = nbdist.nodes()
        except Exception:  # the cluster may be going away; the next read tries again
            log.debug("nbdist.nodes() failed", exc_info=True)
            return
        records = [events.NodeDown(self._clock(), n["NodeID"], "the cluster lists it as dead")
                   for n in listed if n["NodeID"] in shown and not n["Alive"]]
        if records:
            with self._model_lock:
                self._model.apply(records)

    _nodes_read_at = float("-inf")

    def _read_app_state(self) -> None:
        if not nbdist.is_initialized() or (
                self._monotonic() - self._app_read_at < APP_STATE_S):
            return
        self._app_read_at = self._monotonic()
        try:
            metrics = [app_metric(row) for row in nbdist.util.metrics.snapshot()]
            table = nbdist.util.placement_group_table()
            groups = [placement_group(key, row) for key, row in table.items()]
        except Exception:  # the cluster may be going away; the next read tries again
            log.debug("reading the application metrics failed", exc_info=True)
            return
        with self._model_lock:
            self._model.set_app_state(metrics, groups[-MAX_PLACEMENT_GROUPS:])


class Machinery:
    """Keeps the records of nbdist's own metrics actor out of the panel, which shows the
    user's work: the hub's reads of the metrics (two calls a second while metrics exist) and
    the driver's flushes would otherwise fill the graph, the waits (under whichever cell runs)
    and the actors. Its calls are known by the actor's class in their names (or its actor by
    its registered name); their return objects, the waits on them and their ends by the ids
    those calls brought. Once grouped, the engine's tally still counts them."""

    PREFIX = "_Aggregator."

    def __init__(self) -> None:
        self.tasks: set[str] = set()
        self.objects: set[str] = set()
        self.waits: set[int] = set()

    def keep(self, batch: list[Any]) -> list[Any]:
        return [e for e in batch if not self._ours(e)]

    def _ours(self, e: Any) -> bool:
        kind = type(e)
        if kind is events.TaskSubmitted:
            if not e.name.startswith(self.PREFIX):
                return False
            self.tasks.add(e.task_id)
            self.objects.update(e.returns)
            return True
        if kind is events.ActorCreated:
            return bool(e.name == nbdist.util.metrics.AGGREGATOR)
        if kind is events.WaitBegun:
            if e.object_ids and self.objects.issuperset(e.object_ids):
                self.waits.add(e.wait_id)
                return True
            return False
        wait_id = getattr(e, "wait_id", None)
        if wait_id is not None:
            ours = wait_id in self.waits
            if kind is events.WaitDone:
                self.waits.discard(wait_id)
            return ours
        object_id = getattr(e, "object_id", None)
        if object_id in self.objects:
            if kind is events.ObjectFreed:
                self.objects.discard(object_id)
            return True
        task_id = getattr(e, "task_id", None)
        if task_id in self.tasks:
            if kind in (events.TaskFinished, events.TaskFailed):
                self.tasks.discard(task_id)
            return True
        return False


def app_metric(row: dict[str, Any]) -> schema.AppMetric:
    """A row of `nbdist.util.metrics.snapshot()` as the panel receives it."""
    out: schema.AppMetric = {"name": str(row["name"]), "kind": str(row["kind"]),
                             "description": str(row.get("description", "")),
                             "tags": {str(k): str(v) for k, v in row.get("tags", {}).items()}}
    if row["kind"] == "histogram":
        out["count"] = int(row["count"])
        out["sum"] = float(row["sum"])
        out["boundaries"] = [float(b) for b in row["boundaries"]]
        out["buckets"] = [int(n) for n in row["buckets"]]
    else:
        out["value"] = float(row["value"])
    return out


def placement_group(key: Any, row: dict[str, Any]) -> schema.PlacementGroup:
    """A row of `nbdist.util.placement_group_table()` (Ray's format) as the panel receives it."""
    bundles = row.get("bundles") or {}
    return {"id": str(row.get("placement_group_id", key)), "name": str(row.get("name") or ""),
            "strategy": str(row.get("strategy", "")), "state": str(row.get("state", "")),
            "bundles": [{str(r): float(n) for r, n in bundle.items()}
                        for _, bundle in sorted(bundles.items())]}


_hub: Hub | None = None


def hub() -> Hub:
    """The hub of this kernel (made on first use), also without the panel's comm target."""
    global _hub
    if _hub is None:
        _hub = Hub()
    return _hub


def register(ip: Any = None) -> Hub:
    """Register the comm target "nbdist" with the running kernel (idempotent).

    ``ip`` is accepted for symmetry with the extension hooks; comm targets are per process."""
    global _hub
    import comm

    if _hub is None:
        _hub = Hub()
    comm.get_comm_manager().register_target(TARGET, _hub.open)
    kernel = getattr(ip, "kernel", None)
    if kernel is not None and hasattr(kernel, "control_handlers"):
        kernel.control_handlers[STEP_REQUEST] = functools.partial(_step_request, kernel)
        kernel.control_handlers[DEBUG_REQUEST] = functools.partial(_debug_request, kernel)
    return _hub


# The panel's step-through buttons travel on the kernel's control channel, not the comm: a
# cell blocked in `get` on a held task keeps the shell thread busy, so a comm message would
# wait for the cell, and the cell for the message. ipykernel handles control messages on a
# thread of their own and looks custom types up in ``kernel.control_handlers``.
STEP_REQUEST = "nbdist_step_request"
STEP_REPLY = "nbdist_step_reply"


def step_command(command: str, count: int = 1) -> dict[str, Any]:
    """Carry out a panel command (``on``, ``off``, ``run``, ``step`` ``count`` tasks, or
    ``level``) without waiting for the released tasks; the reply's content."""
    if command != "on" and not nbdist.is_initialized():
        return {"status": "error", "message": "no nbdist cluster runs in this kernel"}
    if command == "on":
        status = nbdist.step_mode(True)
    elif command in ("off", "run"):
        status = nbdist.step_mode(False)
    elif command in ("step", "level"):
        status = nbdist.step("level" if command == "level" else max(1, int(count)), wait=False)
    else:
        return {"status": "error", "message": f"unknown step command {command!r}"}
    return {"status": "ok", "on": status.on, "held": status.held,
            "released": len(status.released)}


def _step_request(kernel: Any, stream: Any, idents: Any, msg: dict[str, Any]) -> None:
    content = msg.get("content") or {}
    try:
        reply = step_command(str(content.get("command", "")), int(content.get("count", 1)))
    except Exception as exc:  # the panel shows the message; the control thread goes on
        reply = {"status": "error", "message": f"{type(exc).__name__}: {exc}"}
    kernel.session.send(stream, STEP_REPLY, reply, parent=msg, ident=idents)


# The details' stack of a selected running task and the wait row's "why" travel the same way:
# both are asked while a cell is blocked in the get they explain.
DEBUG_REQUEST = "nbdist_debug_request"
DEBUG_REPLY = "nbdist_debug_reply"
STACK_TIMEOUT_S = 2.0  # a worker in a long C call answers late: the panel asks again


def debug_query(what: str, target: str) -> dict[str, Any]:
    """``what`` "stack": the current Python stack of the task ``target`` (its id);
    "why": why the wait ``target`` (its id) waits. The reply's content: status and text."""
    if not nbdist.is_initialized():
        return {"status": "error", "message": "no nbdist cluster runs in this kernel"}
    if what == "stack":
        from nbdist.util.pdb import stacks

        text = stacks(target, timeout=STACK_TIMEOUT_S) if target else ""
    elif what == "why":
        text = _why(target)
    else:
        return {"status": "error", "message": f"unknown debug query {what!r}"}
    return {"status": "ok", "what": what, "target": target, "text": text}


# `why` folds the whole event history (a second for some 100,000 records): an answer is
# reused for WHY_REUSE times as long as it took (at least WHY_MIN_S), so however often views
# ask, it costs the kernel a tenth of a core at most.
WHY_REUSE = 10
WHY_MIN_S = 2.0
_whys: dict[str, tuple[float, str]] = {}  # wait id -> (reusable until, answer)


def _why(target: str) -> str:
    from nbdist.util.why import why

    now = time.monotonic()
    kept = _whys.get(target)
    if kept is not None and now < kept[0]:
        return kept[1]
    text = why(int(target))
    took = time.monotonic() - now
    if len(_whys) > 100:
        _whys.clear()
    _whys[target] = (now + took + max(WHY_MIN_S, WHY_REUSE * took), text)
    return text


def _debug_request(kernel: Any, stream: Any, idents: Any, msg: dict[str, Any]) -> None:
    content = msg.get("content") or {}
    try:
        reply = debug_query(str(content.get("what", "")), str(content.get("target", "")))
    except Exception as exc:  # the panel shows the message; the control thread goes on
        reply = {"status": "error", "message": f"{type(exc).__name__}: {exc}"}
    kernel.session.send(stream, DEBUG_REPLY, reply, parent=msg, ident=idents)


def unregister(ip: Any = None) -> None:
    """Remove the comm target; open comms keep working until they close."""
    import comm

    manager = comm.get_comm_manager()
    if TARGET in manager.targets:
        manager.unregister_target(TARGET, manager.targets[TARGET])
    handlers = getattr(getattr(ip, "kernel", None), "control_handlers", None)
    if handlers is not None:
        handlers.pop(STEP_REQUEST, None)
        handlers.pop(DEBUG_REQUEST, None)

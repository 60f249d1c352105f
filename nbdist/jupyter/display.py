"""What a notebook shows for nbdist values: ObjectRef HTML, wait progress bars, Out[] history.

Everything here is fed by the event stream (`nbdist.events.subscribe`), never by engine state:

    ObjectTracker     folds events into {object id -> state, size, node}: a task's return refs
                      are "pending" when submitted, "running" when it starts, "finished" /
                      "failed" when it ends; puts are "finished" when created; freed objects are
                      forgotten. Bounded (oldest entries dropped past MAX_OBJECTS).
    ProgressBars      a get/wait still blocked after PROGRESS_DELAY_S gets an ipywidgets
                      IntProgress (ready / total) in the cell that called it, updated as its
                      objects finish and closed when the wait is done.
    HistoryGuard      the Out[] rule: a cell result that holds ObjectRefs is displayed but not
                      kept in the output history (Out[n], _n, _, __, ___), so the history never
                      keeps an object alive in the store by accident (see docs/jupyter.md).

Threads: the tracker and the progress bars run on the event dispatcher thread and on timer
threads; one lock guards the tracker's tables. The guard runs on the kernel's main thread.
"""

from __future__ import annotations

import collections
import html
import threading
from collections.abc import Callable
from typing import Any

import nbdist
from nbdist import events

MAX_OBJECTS = 100_000
PROGRESS_DELAY_S = 1.0
UNKNOWN_WAIT_S = 4 * events.BATCH_INTERVAL_S
_MAX_SCAN = 10_000


class ObjectTracker:
    """Object states folded from the event stream (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._objects: collections.OrderedDict[str, dict[str, Any]] = collections.OrderedDict()
        self._returns: dict[str, tuple[str, ...]] = {}
        self.listeners: list[Callable[[], None]] = []

    def on_events(self, batch: list[events.Event]) -> None:
        with self._lock:
            for event in batch:
                self._apply(event)
            while len(self._objects) > MAX_OBJECTS:
                self._objects.popitem(last=False)
            self._changed.notify_all()
        for listener in list(self.listeners):
            listener()

    def _apply(self, e: events.Event) -> None:
        if isinstance(e, events.TaskSubmitted):
            self._returns[e.task_id] = e.returns
            for oid in e.returns:
                self._objects[oid] = {"state": "pending", "task": e.name}
        elif isinstance(e, events.TaskStarted):
            self._set_returns(e.task_id, state="running", node=e.node_id)
        elif isinstance(e, events.TaskFinished):
            self._set_returns(e.task_id, state="finished", node=e.node_id)
            self._returns.pop(e.task_id, None)
        elif isinstance(e, events.TaskFailed):
            self._set_returns(e.task_id, state="failed", error=e.error_type)
            self._returns.pop(e.task_id, None)
        elif isinstance(e, events.ObjectCreated):
            entry = self._objects.setdefault(e.object_id, {})
            if entry.get("state") != "failed":
                entry["state"] = "finished"
            entry.update(size=e.size, node=e.node_id)
        elif isinstance(e, events.ObjectFreed):
            self._objects.pop(e.object_id, None)

    def _set_returns(self, task_id: str, **fields: Any) -> None:
        for oid in self._returns.get(task_id, ()):
            entry = self._objects.setdefault(oid, {})
            if entry.get("state") == "finished" and fields.get("state") == "running":
                continue  # a late started-notice must not undo a result
            entry.update(fields)

    def info(self, object_id: str) -> dict[str, Any]:
        """What is known about ``object_id``; a ref made a moment ago (its events are still in
        the dispatcher's next batch) is waited for briefly rather than shown as unknown."""
        with self._changed:
            self._changed.wait_for(lambda: object_id in self._objects, UNKNOWN_WAIT_S)
            return dict(self._objects.get(object_id, {}))

    def count_done(self, object_ids: tuple[str, ...]) -> int:
        with self._lock:
            return sum(1 for oid in object_ids
                       if self._objects.get(oid, {}).get("state") in ("finished", "failed"))


_STATE_COLOURS = {"pending": "#9e9e9e", "running": "#1e88e5", "finished": "#43a047",
                  "failed": "#e53935"}


def ref_html(ref: nbdist.ObjectRef, tracker: ObjectTracker) -> str:
    info = tracker.info(ref.hex())
    state = info.get("state", "unknown")
    colour = _STATE_COLOURS.get(state, "#9e9e9e")
    size = _human_size(info["size"]) if "size" in info else "–"
    node = html.escape(str(info.get("node", "–"))[:12])
    task = f" from <code>{html.escape(info['task'])}</code>" if "task" in info else ""
    return (f'<span class="nbdist-ref" data-state="{state}">ObjectRef '
            f"<code>{ref.hex()[:16]}</code>{task} "
            f'<b style="color:{colour}">{state}</b> · size {size} · node {node}</span>')


def _human_size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


class ProgressBars:
    """An IntProgress for every get/wait that is still blocked after PROGRESS_DELAY_S."""

    def __init__(self, tracker: ObjectTracker, show: Callable[[str | None, Any], None]) -> None:
        self.tracker = tracker
        self._show = show  # show(tag, widget): display the widget in that cell's output
        self._lock = threading.Lock()
        self._waits: dict[int, dict[str, Any]] = {}
        tracker.listeners.append(self._refresh)

    def on_events(self, batch: list[events.Event]) -> None:
        for e in batch:
            if isinstance(e, events.WaitBegun):
                timer = threading.Timer(PROGRESS_DELAY_S, self._open, (e.wait_id,))
                timer.daemon = True
                with self._lock:
                    self._waits[e.wait_id] = {"event": e, "timer": timer, "bar": None}
                timer.start()
            elif isinstance(e, events.WaitDone):
                with self._lock:
                    entry = self._waits.pop(e.wait_id, None)
                if entry is not None:
                    entry["timer"].cancel()
                    if entry["bar"] is not None:
                        entry["bar"].close()

    def _open(self, wait_id: int) -> None:
        import ipywidgets

        with self._lock:
            entry = self._waits.get(wait_id)
            if entry is None:
                return
            begun: events.WaitBegun = entry["event"]
            total = len(begun.object_ids) if begun.call == "get" else begun.num_returns
            bar = ipywidgets.IntProgress(
                value=self.tracker.count_done(begun.object_ids), min=0, max=total,
                description=f"{begun.call}()", bar_style="info")
            entry["bar"] = bar
        self._show(begun.submitter, bar)

    def _refresh(self) -> None:
        with self._lock:
            live = [(e["event"], e["bar"]) for e in self._waits.values() if e["bar"] is not None]
        for begun, bar in live:
            bar.value = min(bar.max, self.tracker.count_done(begun.object_ids))


def holds_refs(value: Any, depth: int = 2) -> bool:
    """True if ``value`` is an ObjectRef or a (nested) list/tuple/set/dict holding one."""
    if isinstance(value, nbdist.ObjectRef):
        return True
    if depth == 0:
        return False
    if isinstance(value, dict):
        items: Any = list(value.values())[:_MAX_SCAN]
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)[:_MAX_SCAN]
    else:
        return False
    return any(holds_refs(item, depth - 1) for item in items)


class HistoryGuard:
    """Keeps cell results that hold ObjectRefs out of IPython's output history."""

    _UNDERS = ("_", "__", "___")

    def __init__(self, ip: Any) -> None:
        self.ip = ip
        self._saved: dict[str, tuple[Any, Any, Any]] = {}

    def pre_run_cell(self, info: Any = None) -> None:
        ns, hidden, hook = self.ip.user_ns, self.ip.user_ns_hidden, self.ip.displayhook
        self._saved = {name: (ns.get(name), hidden.get(name), getattr(hook, name, None))
                       for name in self._UNDERS}

    def post_run_cell(self, result: Any) -> None:
        hook = self.ip.displayhook
        count = getattr(hook, "prompt_count", None)
        out = self.ip.user_ns.get("Out", {})
        if count not in out or not holds_refs(out[count]):
            return
        del out[count]
        self.ip.user_ns.pop(f"_{count}", None)
        self.ip.user_ns_hidden.pop(f"_{count}", None)
        # Undo the shift of _, __, ___ that displaying this result made, everywhere IPython
        # keeps them (user namespace, its hidden copy, the display hook itself).
        for name, (user, hidden, own) in self._saved.items():
            self.ip.user_ns[name] = user
            self.ip.user_ns_hidden[name] = hidden
            setattr(hook, name, own)
        if getattr(result, "result", None) is not None:
            result.result = None  # ip.last_execution_result would keep it too

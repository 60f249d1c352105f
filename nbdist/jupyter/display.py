"""What a notebook shows for nbdist values: ObjectRef HTML, wait progress bars, Out[] history.

Everything here comes from the event stream (`nbdist.events`), never from engine state:

    ref_html          an ObjectRef's state, size and node, as `events.object_info` has it
                      (the engine's fold of the stream, as of the call): "pending" or
                      "scheduled" while its task waits, "running", "finished" or "failed"
    ProgressBars      a get/wait still blocked after PROGRESS_DELAY_S gets an ipywidgets
                      IntProgress (ready / total) in the cell that called it, updated by its
                      progress records and closed when the wait is done; it follows the wait
                      records only, so no other record is built for it
    HistoryGuard      the Out[] rule: a cell result that holds ObjectRefs is displayed but not
                      kept in the output history (Out[n], _n, _, __, ___), so the history never
                      keeps an object alive in the store by accident (see docs/jupyter.md).

Threads: the progress bars run on the event dispatcher thread and on timer threads; one lock
guards their table. The guard runs on the kernel's main thread.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable
from typing import Any

import nbdist
from nbdist import events

PROGRESS_DELAY_S = 1.0
WAIT_KINDS = ("wait_begun", "wait_progress", "wait_done")
_MAX_SCAN = 10_000


_STATE_COLOURS = {"pending": "#9e9e9e", "scheduled": "#fbc02d", "running": "#1e88e5",
                  "finished": "#43a047", "failed": "#e53935"}


def ref_html(ref: nbdist.ObjectRef) -> str:
    info = events.object_info([ref.hex()]).get(ref.hex(), {})
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

    def __init__(self, show: Callable[[str | None, Any], None]) -> None:
        self._show = show  # show(tag, widget): display the widget in that cell's output
        self._lock = threading.Lock()
        self._waits: dict[int, dict[str, Any]] = {}

    def on_events(self, batch: list[events.Event]) -> None:
        for e in batch:
            if isinstance(e, events.WaitBegun):
                timer = threading.Timer(PROGRESS_DELAY_S, self._open, (e.wait_id,))
                timer.daemon = True
                with self._lock:
                    self._waits[e.wait_id] = {"event": e, "timer": timer, "bar": None,
                                              "ready": e.ready}
                timer.start()
            elif isinstance(e, events.WaitProgress):
                with self._lock:
                    entry = self._waits.get(e.wait_id)
                    if entry is None:
                        continue
                    entry["ready"] = max(entry["ready"], e.ready)
                    bar = entry["bar"]
                if bar is not None:
                    bar.value = min(bar.max, e.ready)
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
                value=min(total, entry["ready"]), min=0, max=total,
                description=f"{begun.call}()", bar_style="info")
            entry["bar"] = bar
        self._show(begun.submitter, bar)


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

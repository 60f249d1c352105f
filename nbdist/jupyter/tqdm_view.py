"""tqdm_ray bars as notebook widgets: one widget per bar, updated in place.

    task: tqdm_ray.tqdm ── stdout line "__nbdist_tqdm_ray__{json state}" ──▶ driver
        ──▶ output filters (nbdist.events): TqdmBars.take_output, ahead of tqdm_ray's own
            ├─ first update of a bar: display a widget in the cell that submitted the task
            └─ later updates: set that widget's values

``nbdist.experimental.tqdm_ray`` marks each bar update as one stdout line: `MARK` followed by
the bar's state as JSON (``uuid``, ``desc``, ``x``, ``total``, ``unit``, ``closed``, ``pid``).
That line is the contract between the two (the engine's module is not imported here, as for
any engine internals). The filter is added first, so it sees the marked lines before
tqdm_ray's text renderer would, whichever was loaded first. The record's ``submitter`` tag names
the cell; a bar made in the driver is passed through the same filters by tqdm_ray, tagged with
the cell running it.

Threads: ``take_output`` runs on the thread that receives remote output, or on the thread of a
driver's bar; one lock guards the table of open bars. A closed bar keeps its widget (its final
count stays on screen) and leaves the table.
"""

from __future__ import annotations

import html
import json
import threading
from collections.abc import Callable
from typing import Any

from nbdist import events

MARK = "__nbdist_tqdm_ray__"  # tqdm_ray.MAGIC: what starts a bar's line
MAX_BARS = 1000  # open bars remembered; a bar that never closes must not grow this forever


def parse(line: str) -> dict[str, Any] | None:
    """The bar state a marked line carries, or None for any other line."""
    at = line.find(MARK)
    if at < 0:
        return None
    try:
        state = json.loads(line[at + len(MARK):])
    except ValueError:
        return None
    return state if isinstance(state, dict) else None


def bar_label(state: dict[str, Any]) -> str:
    """The text beside a bar: its description, count, and where it runs."""
    desc = state.get("desc") or ""
    x, total = state.get("x", 0), state.get("total")
    unit = state.get("unit") or "it"
    count = f"{x}/{total}" if total else f"{x} {unit}"
    where = f" ({state['task']} pid={state['pid']})" if state.get("task") else ""
    done = " done" if state.get("closed") else ""
    return html.escape(f"{desc}: {count}{where}{done}" if desc else f"{count}{where}{done}")


class TqdmBars:
    """The notebook's drawing of tqdm_ray bars (install/uninstall with the extension)."""

    def __init__(self, show: Callable[[str | None, Any], None],
                 current_tag: Callable[[], str | None]) -> None:
        self._show = show  # show(tag, widget): display the widget in that cell's output
        self._current_tag = current_tag
        self._bars: dict[str, tuple[Any, Any]] = {}
        self._lock = threading.Lock()
        self._remove: Callable[[], None] | None = None

    def install(self) -> None:
        if self._remove is None:
            self._remove = events.add_output_filter(self.take_output, first=True)

    def uninstall(self) -> None:
        if self._remove is not None:
            self._remove()
            self._remove = None
        with self._lock:
            self._bars.clear()

    def take_output(self, lines: list[events.Output]) -> list[events.Output]:
        """The output filter: draws the bars' marked lines, returns the other lines."""
        rest = []
        for e in lines:
            state = parse(e.line) if e.stream == "stdout" else None
            if state is None:
                rest.append(e)
            else:
                self.render({**state, "task": e.name or None, "pid": e.worker_pid,
                             "tag": e.submitter})
        return rest

    def render(self, state: dict[str, Any]) -> None:
        key = str(state.get("uuid"))
        with self._lock:
            widgets = self._bars.get(key) or self._open(key, state)
            progress, label = widgets
            total = state.get("total")
            if total:
                progress.max = max(int(total), 1)
            progress.value = min(int(state.get("x") or 0), progress.max)
            label.value = bar_label(state)
            if state.get("closed"):
                progress.bar_style = "success"
                self._bars.pop(key, None)

    def _open(self, key: str, state: dict[str, Any]) -> tuple[Any, Any]:
        import ipywidgets

        total = state.get("total")
        # Without a total the bar cannot fill: it stays empty and the label counts.
        progress = ipywidgets.IntProgress(value=0, min=0, max=max(int(total or 1), 1))
        label = ipywidgets.HTML(bar_label(state))
        self._show(state.get("tag") or self._current_tag(), ipywidgets.HBox([progress, label]))
        if len(self._bars) >= MAX_BARS:
            self._bars.pop(next(iter(self._bars)))
        self._bars[key] = (progress, label)
        return progress, label

"""``nbdist.show()``: an inline live view for frontends without the JupyterLab panel (classic
notebook, VS Code), built with ipywidgets and bokeh.

    summary     tasks per state, objects and bytes, nodes and busy workers   (ipywidgets.HTML)
    task graph  tasks and their dependencies coloured by state; task groups  (bokeh, plots.py)
                once the model groups tasks (past a few thousand)
    objects     object store table: object, size, owner, locations, task,   (ipywidgets.HTML)
                shared memory (the largest first); per-node totals once grouped
    waits       a progress bar (ready / total) per active get/wait, and the  (ipywidgets.IntProgress)
                last few finished ones
    timeline    one row per worker, a bar per task execution                 (bokeh, plots.py)

Data: the view keeps its own `model.Model` (the same fold of the event stream the comm bridge
uses, used as is), fed by its own ``events.subscribe``; on start it replays the current
cluster's history (``events.current_cluster``), skipping records delivered twice around
that moment by identity (as the bridge does). Once the model is grouped, each update also gives
it the engine's `events.summary()`. The timeline is the engine's (``events.executions``,
``events.timeline_version``).

Updates: one thread (``nbdist-liveview``) wakes every ``UPDATE_INTERVAL_S`` (4 times a second
at most) and, if the model changed, updates the widgets (traitlets send only values that
changed). The bokeh figures are rebuilt and re-sent only when their data changed, at most every
``FIGURE_INTERVAL_S``. The thread ends, after a last update, when the cluster it follows stops
(the one running at ``show()``, or the next one to start), when ``stop()`` or ``close()`` is
called, when the "Stop updates" button is pressed, or when the frontend closes the widget; it
unsubscribes from the event stream as it goes. Nothing is left running.

BokehJS is loaded into the page, from the installed bokeh package, before the view is displayed
(``plots.load_bokeh``: once per frontend connection, no CDN); each figure is an HTML fragment
(div and script, ``bokeh.embed.components``) in an ipywidgets.Output.
"""

from __future__ import annotations

import html
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from nbdist import events
from nbdist.jupyter import plots, schema
from nbdist.jupyter.model import Model

__all__ = ["LiveView", "show"]

log = logging.getLogger(__name__)

UPDATE_INTERVAL_S = 0.25
FIGURE_INTERVAL_S = 1.0
MAX_OBJECT_ROWS = 100
MAX_FINISHED_WAIT_BARS = 5
MAX_TIMELINE_BARS = 2_000


def _mib(n: float) -> str:
    if n < 2**20:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 2**20:.1f} MiB"


def summary_html(snap: schema.Snapshot, status: str) -> str:
    """The one-line summary above the view."""
    t = snap["totals"]
    workers = [w for w in snap["workers"].values() if w["state"] == "up"]
    busy = sum(1 for w in workers if w["task"])
    parts = [
        f"<b>tasks</b> {t['tasks']}: {t['pending']} pending, {t.get('scheduled', 0)} "
        f"scheduled, {t['running']} running, "
        f"{t['finished']} finished, <span style='color:{plots.COLORS['failed']}'>"
        f"{t['failed']} failed</span>",
        f"<b>objects</b> {t['objects']} ({_mib(t['bytes'])})",
        f"<b>nodes</b> {len(snap['nodes'])}, <b>workers</b> {len(workers)} ({busy} busy)",
    ]
    if t.get("dropped_events"):
        parts.append(f"<b>{t['dropped_events']} events dropped</b> (some states may be stale)")
    return (f"<div class='nbdist-liveview-summary'><b>nbdist</b> — {html.escape(status)}<br>"
            + " · ".join(parts) + "</div>")


def objects_html(snap: schema.Snapshot, max_rows: int = MAX_OBJECT_ROWS) -> str:
    """The object store table (the largest objects first), or per-node totals once grouped."""
    if snap.get("grouped"):
        rows = "".join(
            f"<tr><td><code>{html.escape(n['id'])}</code></td><td>{n['objects']}</td>"
            f"<td>{_mib(n['bytes'])}</td><td>{_mib(n['shm_bytes'])}</td></tr>"
            for n in snap["nodes"].values())
        return ("<p>Many tasks: objects are counted per node.</p><table class='nbdist-objects'>"
                "<thead><tr><th>node</th><th>objects</th><th>bytes</th><th>in shared memory"
                f"</th></tr></thead><tbody>{rows}</tbody></table>")
    objs = sorted(snap["objects"].values(), key=lambda o: (-o["size"], o["id"]))
    shown = objs[:max_rows]
    rows = "".join(
        f"<tr><td><code>{html.escape(o['id'])}</code></td><td>{o['size']:,} B</td>"
        f"<td><code>{html.escape(str(o['owner']))}</code></td>"
        f"<td>{html.escape(', '.join(o['locations']))}</td>"
        f"<td><code>{html.escape(str(o['task'] or 'put'))}</code></td>"
        f"<td>{'yes' if o['in_shared_memory'] else 'inline'}</td></tr>"
        for o in shown)
    more = (f"<p>the {len(shown)} largest of {len(objs)} objects</p>"
            if len(objs) > len(shown) else "")
    return (f"{more}<table class='nbdist-objects'><thead><tr><th>object</th><th>size</th>"
            "<th>owner</th><th>locations</th><th>made by</th><th>shared memory</th></tr>"
            f"</thead><tbody>{rows}</tbody></table>"
            + ("" if objs else "<p><i>no objects in the store</i></p>"))


def waits_to_show(snap: schema.Snapshot,
                  max_finished: int = MAX_FINISHED_WAIT_BARS) -> list[schema.Wait]:
    """Active waits (all of them) and the last few finished ones, oldest first."""
    waits = sorted(snap["waits"].values(), key=lambda w: (w["started"] or 0, w["id"]))
    finished = [w for w in waits if w["done"]][-max_finished:] if max_finished else []
    keep = {w["id"] for w in finished}
    return [w for w in waits if not w["done"] or w["id"] in keep]


def _html_output(fragment: str) -> dict[str, Any]:
    return {"output_type": "display_data", "data": {"text/html": fragment}, "metadata": {}}


class _ViewBox(widgets.VBox):
    """The view's outer widget: closing it stops the view's updates."""

    def __init__(self, view: LiveView, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._nbdist_view = view

    def close(self) -> None:
        view = getattr(self, "_nbdist_view", None)
        if view is not None:
            view.stop()
        super().close()


class LiveView:
    """The live view (see the module docstring). ``widget`` is what is displayed."""

    def __init__(self, is_initialized: Callable[[], bool], interval: float = UPDATE_INTERVAL_S,
                 figure_interval: float = FIGURE_INTERVAL_S) -> None:
        # Given by nbdist.show(), which imports this module: importing nbdist back would make
        # the package and its notebook layer import each other.
        self.is_initialized = is_initialized
        self.interval = interval
        self.figure_interval = figure_interval
        self._lock = threading.Lock()
        self._model = Model()
        self._replay = events.Replay()
        self._unsubscribe: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._snap: schema.Snapshot | None = None
        self._timeline_version = -1
        self._graph_dirty = self._timeline_dirty = False
        self._last_figures = float("-inf")
        self._displayed_in: int | None = None
        self.status = "starting"
        self.graph_columns: tuple[plots.Columns, plots.Columns] = ({}, {})  # as last drawn
        self.updates = 0  # refreshes that found the model changed
        self.figure_updates = 0

        self.summary = widgets.HTML()
        self.stop_button = widgets.Button(description="Stop updates", button_style="",
                                          layout=widgets.Layout(width="auto"))
        self.stop_button.on_click(lambda _b: self.stop())
        self.graph = widgets.Output()
        self.objects = widgets.HTML()
        self.waits = widgets.VBox()
        self.timeline = widgets.Output()
        self._bars: dict[str, widgets.IntProgress] = {}

        def heading(text: str) -> widgets.HTML:
            return widgets.HTML(f"<h4 style='margin:6px 0 2px'>{text}</h4>")

        self.widget = _ViewBox(self, children=[
            widgets.HBox([self.summary, self.stop_button]),
            heading("Task graph"), self.graph,
            heading("Object store"), self.objects,
            heading("Waits (get / wait)"), self.waits,
            heading("Timeline"), self.timeline,
        ])

    # ------------------------------------------------------------ lifecycle
    @property
    def running(self) -> bool:
        """Whether the view still follows the cluster."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def start(self) -> None:
        """Subscribe, replay the current cluster's history, render once, start updating."""
        if self._thread is not None:
            return
        events.timeline_version()  # the timeline follows the stream from now on
        with self._lock:
            self._unsubscribe = events.subscribe(self._on_events, raw=True)
            # Raw items, so those replayed are recognised by identity when delivered too.
            raw = events.current_cluster(events.recent(raw=True))
            self._replay = events.Replay(raw)
            self._model.apply([events.build(x) for x in raw])
        self.status = "following the cluster" if self.is_initialized() else \
            "waiting for a cluster to start"
        self.refresh(force=True)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="nbdist-liveview", daemon=True)
        self._thread.start()

    def stop(self, reason: str = "stopped") -> None:
        """Stop updating (the view stays as it is); idempotent."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(10)
        self._unsubscribe_events()
        if self.status.startswith(("following", "waiting", "starting")):
            self.status = reason
            self.summary.value = summary_html(self._snap, reason) if self._snap else ""

    def close(self) -> None:
        """Stop updating and remove the view from the page."""
        self.stop()
        for child in (self.summary, self.stop_button, self.graph, self.objects, self.timeline,
                      *self._bars.values(), self.waits):
            child.close()
        self.widget.close()

    def _unsubscribe_events(self) -> None:
        with self._lock:
            unsubscribe, self._unsubscribe = self._unsubscribe, None
            self._replay = events.Replay()
        if unsubscribe is not None:
            unsubscribe()

    def _on_events(self, items: list[Any]) -> None:
        with self._lock:
            if self._unsubscribe is None:
                return
            self._model.apply([events.build(x) for x in self._replay.fresh(items)])

    def _run(self) -> None:
        seen_cluster = self.is_initialized()
        while not self._stop.wait(self.interval):
            alive = self.is_initialized()
            if alive and not seen_cluster:
                seen_cluster, self.status = True, "following the cluster"
            try:
                if seen_cluster and not alive:
                    events.bus().flush()  # the cluster's last records, then a last update
                    self.status = "stopped: the cluster stopped"
                    self.refresh(force=True)
                    break
                self.refresh()
            except Exception:  # a bug here must not leave a half-stopped view
                log.exception("nbdist live view failed to update")
        self._unsubscribe_events()

    # ------------------------------------------------------------ rendering
    def refresh(self, force: bool = False) -> None:
        """Bring the widgets up to date with the model (the figures only if due or forced)."""
        summary = events.summary() if self._model.grouped else None
        with self._lock:
            if summary is not None:
                self._model.apply_summary(summary)
            changed = self._model.take_delta() is not None
            snap = self._model.snapshot() if changed or force or self._snap is None else None
        if snap is not None:
            self._snap = snap
            self.updates += changed
            self.summary.value = summary_html(snap, self.status)
            self.objects.value = objects_html(snap)
            self._update_waits(snap)
            self._graph_dirty = True
        version = events.timeline_version()
        if version != self._timeline_version:
            self._timeline_version = version
            self._timeline_dirty = True
        now = time.monotonic()
        if (self._graph_dirty or self._timeline_dirty) and (
                force or now - self._last_figures >= self.figure_interval):
            self._last_figures = now
            self._render_figures()

    def _update_waits(self, snap: schema.Snapshot) -> None:
        shown = waits_to_show(snap)
        ids = [w["id"] for w in shown]
        for wid in [wid for wid in self._bars if wid not in ids]:
            self._bars.pop(wid).close()
        for w in shown:
            bar = self._bars.get(w["id"])
            if bar is None:
                bar = self._bars[w["id"]] = widgets.IntProgress(
                    min=0, layout=widgets.Layout(width="60%"),
                    style={"description_width": "initial"})
            style = ("warning" if w["timed_out"] else "success") if w["done"] else ""
            # max before value: the value is clamped to the max in force when it is set.
            bar.max = max(1, w["total"])
            bar.value = min(w["ready"], bar.max)
            bar.bar_style = style
            bar.description = (f"{w['call']} #{w['id']}: {w['ready']} / {w['total']}"
                               + (" (timed out)" if w["timed_out"] else
                                  " done" if w["done"] else ""))
        children = tuple(self._bars[wid] for wid in ids)
        if tuple(self.waits.children) != children:
            self.waits.children = children if children else (
                widgets.HTML("<i>no get / wait calls yet</i>"),)

    def _render_figures(self) -> None:
        snap = self._snap
        if self._graph_dirty and snap is not None:
            self._graph_dirty = False
            self.graph_columns = plots.graph_data(snap)
            self.graph.outputs = (_html_output(plots.html_of(
                plots.graph_figure(snap, self.graph_columns))),)
            self.figure_updates += 1
        if self._timeline_dirty:
            self._timeline_dirty = False
            runs = events.executions(True, last=MAX_TIMELINE_BARS)
            total = events.execution_count(include_running=True)
            self.timeline.outputs = (_html_output(plots.html_of(
                plots.timeline_figure(runs[-MAX_TIMELINE_BARS:], total=total))),)
            self.figure_updates += 1

    # ------------------------------------------------------------ display
    def _ipython_display_(self) -> None:
        from IPython import get_ipython
        from IPython.display import display

        ip = get_ipython()
        count = getattr(ip, "execution_count", None)
        if count is not None and count == self._displayed_in:
            return  # show() displayed it in this very cell already
        plots.load_bokeh()
        display(self.widget)

    def __repr__(self) -> str:
        return f"<nbdist live view: {self.status}>"


def show(is_initialized: Callable[[], bool]) -> LiveView:
    """Display a live view of the cluster in the current cell and return it (see the module
    docstring); ``.close()`` removes it, ``.stop()`` freezes it."""
    from IPython import get_ipython
    from IPython.display import display

    view = LiveView(is_initialized)
    plots.load_bokeh()
    view.start()
    display(view.widget)
    ip = get_ipython()
    view._displayed_in = getattr(ip, "execution_count", None)
    comm = getattr(view.widget, "comm", None)
    if comm is not None:
        comm.on_close(lambda _msg: view.stop("stopped: the view was closed"))
    return view

"""The inline view of library runs (a Tune search, a Train run), for every frontend.

    nbdist.events ─run_update─▶ RunViews.on_events ─▶ RunView (one per run: its own RunsFold)
                                 │  a run not seen before: its view is displayed in the cell
                                 │  that is executing now (the one that called fit())
    a timer thread, at most every UPDATE_INTERVAL_S ─▶ RunView.refresh: table, figure
    remote output ─▶ RunViews.take_output: lines of a trial's actor, grouped per trial

What one view shows: a title line (run, members per status), a metric to plot (a Dropdown of
the metrics the run reports), a bokeh figure of that metric per member over the iterations,
with a mark where a scheduler stopped a trial (x), where a member failed (red x), saved a
checkpoint (open circle) or restarted (filled circle), and a table of the members (status,
iteration, last metrics, config, what just happened). The table updates at most every
``UPDATE_INTERVAL_S``, the figure at most every ``FIGURE_INTERVAL_S``, only when the run changed.
BokehJS comes from the installed bokeh package (``plots.load_bokeh``): no CDN.

Which cell: RunUpdate records carry no cell; ``fit()`` blocks the cell that called it, so the
cell executing when a run's first record is delivered is the one that started it (a run whose
first record comes after its cell ended, e.g. ``fit()`` returned in under ~50 ms, shows in the
next cell that runs). The view is shown also when the JupyterLab panel is open: it is one
compact widget, it stays with the notebook's output, and the panel may be closed or the
notebook opened elsewhere.

Output of trials: the library names its trial actors ``Trial(<trial id>)`` through their
``__repr__`` and its training workers ``...(rank <N>)``, and remote output lines carry that
name (docs/panel.md). Lines of a trial are taken out of the cell's text stream and appended to
that trial's section of an Accordion (collapsible, one section per trial, never interleaved line
by line), placed in the run's view if that cell shows one, else on its own in the cell. Lines of a
training worker stay in the stream, prefixed ``[rank N]``.

Runs executed remotely: a dataset consumed in a task, an actor or a Train worker publishes its
run records there; the engine relays them to the driver, marked with that task and actor
(``RunUpdate.task_id``, ``.actor_id``). Its view names where it ran, and when the cell that
starts it already shows another library's run that the driver runs (a Train run whose ranks
read a ``streaming_split``; a Tune search whose trials run Train), it goes inside that run's
view, below its table (the dataset's lanes below the ranks).

Threads: records arrive on the event dispatcher thread, output on the driver's receiving
thread, refreshes run on a short-lived timer thread; one lock guards the views' state.
"""

from __future__ import annotations

import html
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from nbdist import events
from nbdist.jupyter import plots, schema
from nbdist.jupyter.runs import RunsFold, run_key

log = logging.getLogger(__name__)

UPDATE_INTERVAL_S = 0.5
FIGURE_INTERVAL_S = 1.0
MAX_TABLE_ROWS = 200
MAX_OUTPUT_SECTIONS = 100  # trials with an output section of their own (later ones: "others")
MAX_VIEWS = 20  # runs followed; an older run's view stays on the page as it last was
TRIAL_NAME = re.compile(r"^Trial\((?P<trial>[^()]+)\)")
RANK_NAME = re.compile(r"\brank[ =]?(?P<rank>\d+)\b")
MARKERS = {"stopped": ("x", None), "error": ("x", "#d62728"),
           "checkpoint": ("circle", "white"), "restart": ("circle", None)}
Show = Callable[[str | None, Any], None]


def table_html(run: schema.Run, max_rows: int = MAX_TABLE_ROWS) -> str:
    """The members' table; the metrics shown are those the run follows as curves."""
    esc = html.escape
    head = "".join(f"<th style='text-align:left;padding:0 8px 0 0'>{t}</th>" for t in (
        "member", "status", "iter", "metrics", "config", "last news"))
    rows = []
    members = list(run["members"].values())
    for m in members[:max_rows]:
        metrics = " ".join(f"{k}={v:.4g}" for k, v in m["metrics"].items()
                           if k in run["metrics"])
        config = " ".join(f"{k}={v}" for k, v in m["config"].items())
        cells = (m["id"], m["status"], str(m["iteration"]), metrics or "–", config or "–",
                 m["note"])
        rows.append("<tr data-member='{}'>{}</tr>".format(esc(m["id"]), "".join(
            f"<td style='padding:0 8px 0 0'>{esc(c)}</td>" for c in cells)))
    more = (f"<p><i>and {len(members) - max_rows} more</i></p>"
            if len(members) > max_rows else "")
    return (f"<table class='nbdist-run-table' style='font-size:12px'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>{more}")


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def lanes_html(run: schema.Run) -> str:
    """A dataset's execution (library "data") as its operators, one lane each: a bar of the
    blocks done (dark) and in flight (light), scaled to the busiest operator, then its
    blocks, rows, bytes and blocks in flight, and its status."""
    esc = html.escape
    members = list(run["members"].values())
    most = max([m["metrics"].get("blocks", 0.0) + m["metrics"].get("in_flight", 0.0)
                for m in members] + [1.0])
    rows = []
    for m in members:
        x = m["metrics"]
        blocks, flying = int(x.get("blocks", 0)), int(x.get("in_flight", 0))
        done, busy = 100 * blocks / most, 100 * flying / most
        bar = (f"<div style='width:160px;height:10px;background:#eee;display:flex'>"
               f"<div style='width:{done:.1f}%;background:#1f77b4'></div>"
               f"<div style='width:{busy:.1f}%;background:#aec7e8'></div></div>")
        cells = (esc(m["id"]), bar, f"{blocks:,} blocks", f"{int(x.get('rows', 0)):,} rows",
                 _size(x.get("bytes", 0.0)), f"{flying} in flight", esc(m["status"]))
        rows.append("<tr data-lane='{}' data-blocks='{}' data-in-flight='{}'>{}</tr>".format(
            esc(m["id"]), blocks, flying,
            "".join(f"<td style='padding:0 8px 0 0;white-space:nowrap'>{c}</td>"
                    for c in cells)))
    return (f"<table class='nbdist-data-lanes' style='font-size:12px'>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def where_of(e: events.RunUpdate) -> str:
    """Where a run's record was published: "" in the driver, else its actor or task."""
    if e.actor_id:
        return f"in actor {e.actor_id[-8:]}"
    if e.task_id:
        return f"in task {e.task_id[-8:]}"
    return ""


def title_html(run: schema.Run, where: str = "") -> str:
    counts: dict[str, int] = {}
    for m in run["members"].values():
        counts[m["status"]] = counts.get(m["status"], 0) + 1
    kind = {"train": "workers", "data": "operators", "rllib": "members"}.get(run["library"],
                                                                              "trials")
    states = ", ".join(f"{n} {s.lower()}" for s, n in counts.items())
    return (f"<b>{html.escape(run['library'])} · {html.escape(run['name'])}</b>"
            + (f" <i>{html.escape(where)}</i>" if where else "")
            + f": {len(run['members'])} {kind} ({html.escape(states)})")


def curves_figure(run: schema.Run, metric: str) -> Any:
    """A bokeh figure of ``metric`` per member over the iterations, with the members' marks."""
    from bokeh.models import ColumnDataSource
    from bokeh.palettes import Category10_10
    from bokeh.plotting import figure

    fig = figure(height=240, sizing_mode="stretch_width", x_axis_label="iteration",
                 y_axis_label=metric, toolbar_location="right",
                 tools="pan,wheel_zoom,box_zoom,reset,hover",
                 tooltips=[("member", "@member"), ("iteration", "@x"), (metric, "@y")])
    for i, m in enumerate(run["members"].values()):
        color = Category10_10[i % 10]
        points = m["curves"].get(metric, [])
        if not points:
            continue
        xs, ys = [p[1] for p in points], [p[2] for p in points]
        source = ColumnDataSource({"x": xs, "y": ys, "member": [m["id"]] * len(xs)},
                                  name=f"run-curve:{m['id']}")
        fig.line("x", "y", source=source, color=color, line_width=1.5)
        for mark in m["marks"]:
            x, kind = float(mark[1]), str(mark[2])  # type: ignore[arg-type]
            y = next((p[2] for p in points if p[1] >= x), ys[-1])
            marker, fill = MARKERS.get(kind, ("circle", None))
            fig.scatter([x], [y], marker=marker, size=11, line_width=2,
                        color=fill if fill and kind == "error" else color,
                        fill_color=fill or color)
    return fig


class TrialOutputs:
    """An Accordion with one collapsible section of output per trial."""

    def __init__(self) -> None:
        import ipywidgets as widgets

        self.widget = widgets.Accordion(children=())
        self._outputs: dict[str, Any] = {}
        self._counts: dict[str, int] = {}

    def append(self, trial: str, text: str) -> None:
        import ipywidgets as widgets

        key = trial if trial in self._outputs or len(self._outputs) < MAX_OUTPUT_SECTIONS \
            else "others"
        out = self._outputs.get(key)
        if out is None:
            out = self._outputs[key] = widgets.Output()
            self._counts[key] = 0
            self.widget.children = (*self.widget.children, out)
        out.append_stdout(text)
        self._counts[key] += text.count("\n")
        index = list(self._outputs).index(key)
        self.widget.set_title(index, f"Trial {key}: {self._counts[key]} lines")


class RunView:
    """One run's live view (see the module docstring); ``widget`` is what is displayed."""

    def __init__(self, run_id: str, figure_interval: float = FIGURE_INTERVAL_S) -> None:
        import ipywidgets as widgets

        self.run_id = run_id
        self.figure_interval = figure_interval
        self.fold = RunsFold(max_runs=1)
        self.title = widgets.HTML()
        self.metric = widgets.Dropdown(options=[], description="metric",
                                       layout=widgets.Layout(width="auto"))
        self.metric.observe(lambda _change: self._metric_changed(), names="value")
        self.figure = widgets.Output()
        self.table = widgets.HTML()
        self.outputs: TrialOutputs | None = None
        self.widget = widgets.VBox([widgets.HBox([self.title, self.metric]), self.figure,
                                    self.table], _dom_classes=("nbdist-run-view",))
        self.run: schema.Run | None = None
        self.where = ""  # where it ran, if not in the driver (`where_of`)
        self.dirty = False
        self._figure_dirty = False
        self._figure_at = float("-inf")
        self.figure_updates = 0
        self._refreshing = False

    def apply(self, e: events.RunUpdate) -> None:
        self.fold.apply(e)
        if not self.where:
            self.where = where_of(e)
        self.dirty = True

    def trial_outputs(self) -> TrialOutputs:
        if self.outputs is None:
            self.outputs = TrialOutputs()
            self.widget.children = (*self.widget.children, self.outputs.widget)
        return self.outputs

    def refresh(self, force: bool = False) -> None:
        """Table and title now; the figure when due (or forced)."""
        if self.dirty:
            self.dirty = False
            self.run = self.fold.snapshot().get(self.run_id)
            self.fold.take_delta()
            if self.run is not None and self.run["library"] == "data":
                # A dataset's run: its operators as lanes, no curves to choose or draw.
                self.title.value = title_html(self.run, self.where)
                self.table.value = lanes_html(self.run)
                self.metric.layout.display = "none"
            elif self.run is not None:
                self.title.value = title_html(self.run)
                self.table.value = table_html(self.run)
                self._set_metrics(tuple(self.run["metrics"]))
                self._figure_dirty = True
        now = time.monotonic()
        if self._figure_dirty and (force or now - self._figure_at >= self.figure_interval):
            self._draw()

    def _set_metrics(self, metrics: tuple[str, ...]) -> None:
        if tuple(self.metric.options) == metrics:
            return
        chosen = self.metric.value
        self._refreshing = True
        try:
            self.metric.options = metrics
            if metrics and chosen not in metrics:
                self.metric.value = metrics[0]
        finally:
            self._refreshing = False

    def _metric_changed(self) -> None:
        self._figure_dirty = True
        if not self._refreshing:  # the user chose: draw now (a refresh draws on its own)
            self._draw()

    def _draw(self) -> None:
        run, metric = self.run, self.metric.value
        if run is None or not metric:
            return
        self._figure_dirty = False
        self._figure_at = time.monotonic()
        fragment = plots.html_of(curves_figure(run, metric))
        self.figure.outputs = ({"output_type": "display_data", "metadata": {},
                                "data": {"text/html": fragment}},)
        self.figure_updates += 1


class RunViews:
    """Every run's view, each shown once, in the cell that started the run."""

    def __init__(self, show: Show, current_tag: Callable[[], str | None],
                 interval: float = UPDATE_INTERVAL_S) -> None:
        self._show = show  # show(tag, widget): display in that cell's output
        self._current_tag = current_tag
        self.interval = interval
        self._lock = threading.Lock()
        self.views: dict[str, RunView] = {}
        self._cell_of: dict[str, str | None] = {}  # run id -> the tag of its cell
        self._outputs: dict[str | None, TrialOutputs] = {}  # per cell tag
        self._timer: threading.Timer | None = None
        self._refreshed = float("-inf")

    # ------------------------------------------------------------ records (dispatcher)
    def on_events(self, batch: list[Any]) -> None:
        new: list[tuple[RunView, RunView | None]] = []
        with self._lock:
            for e in batch:
                if type(e) is not events.RunUpdate:
                    continue
                key = run_key(e)
                view = self.views.get(key)
                if view is None:
                    view = self.views[key] = RunView(key)
                    tag = self._cell_of[key] = self._current_tag()
                    new.append((view, self._host_of(e, tag)))
                    self._forget_old()
                view.apply(e)
        for view, host in new:
            view.refresh(force=True)
            if host is not None:  # a remote run within the cell's run (its ingest): below it
                host.widget.children = (*host.widget.children, view.widget)
            else:
                self._show(self._cell_of[view.run_id], view.widget)
        self._schedule()

    def _host_of(self, e: events.RunUpdate, tag: str | None) -> RunView | None:
        """For a run executed remotely (a dataset a Train run's ranks consume, a Train run
        inside a Tune trial), the latest view in the same cell of a run of another library
        that the driver runs, if any (under ``_lock``)."""
        if not (e.task_id or e.actor_id):
            return None
        hosts = [v for k, v in self.views.items() if self._cell_of.get(k) == tag
                 and not v.where and not k.startswith(e.library + ":")]
        return hosts[-1] if hosts else None

    def _forget_old(self) -> None:
        """Past MAX_VIEWS runs, the oldest stops being followed (a long session stays small)."""
        while len(self.views) > MAX_VIEWS:
            old = next(iter(self.views))
            del self.views[old]
            tag = self._cell_of.pop(old)
            if tag not in self._cell_of.values():
                self._outputs.pop(tag, None)

    def _schedule(self) -> None:
        with self._lock:
            if self._timer is not None:
                return
            delay = max(0.0, self._refreshed + self.interval - time.monotonic())
            self._timer = threading.Timer(delay, self._tick)
            self._timer.daemon = True
            self._timer.name = "nbdist-runview"
            self._timer.start()

    def _tick(self) -> None:
        try:
            with self._lock:
                self._timer = None
                self._refreshed = time.monotonic()
                views = [v for v in self.views.values() if v.dirty or v._figure_dirty]
            for view in views:
                view.refresh()
        except Exception:  # a bug here must not stop later updates
            log.exception("nbdist run view failed to update")
        if any(v._figure_dirty for v in views):
            self._schedule()  # a figure not yet due: draw it on a later tick

    def close(self) -> None:
        with self._lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    # ------------------------------------------------------------ output (receiving thread)
    def take_output(self, lines: list[events.Output]) -> list[events.Output]:
        """Group the lines of trials' actors per trial; returns the other lines, those of
        training workers prefixed with their rank."""
        rest: list[events.Output] = []
        grouped: dict[tuple[str | None, str], list[str]] = {}
        for line in lines:
            named = TRIAL_NAME.match(line.name)
            if named is not None:
                text = line.line if line.stream == "stdout" else f"[stderr] {line.line}"
                grouped.setdefault((line.submitter, named["trial"]), []).append(text)
                continue
            rank = RANK_NAME.search(line.name)
            if rank is not None:
                line = events.Output(line.time, line.task_id, f"rank {rank['rank']}",
                                     line.worker_pid, line.stream, line.line, line.submitter)
            rest.append(line)
        for (tag, trial), texts in grouped.items():
            self._outputs_for(tag).append(trial, "".join(t + "\n" for t in texts))
        return rest

    def _outputs_for(self, tag: str | None) -> TrialOutputs:
        with self._lock:
            outputs = self._outputs.get(tag)
            if outputs is not None:
                return outputs
            known = tag in self._cell_of.values()
        if not known:
            # The run's first records may still wait in the event stream (a trial prints as
            # soon as it starts): deliver them, so its view exists and takes the output.
            events.bus().flush()
        with self._lock:
            outputs = self._outputs.get(tag)
            if outputs is not None:
                return outputs
            view = next((self.views[k] for k, t in self._cell_of.items() if t == tag), None)
            outputs = self._outputs[tag] = (view.trial_outputs() if view is not None
                                            else TrialOutputs())
        if view is None:
            self._show(tag, outputs.widget)
        return outputs

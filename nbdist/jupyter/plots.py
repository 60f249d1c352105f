"""bokeh figure of the task timeline (used by ``%nbdist timeline``; the task graph is the
panel's, also inline: `nbdist.jupyter.widget`).

The data side is pure and testable without a browser: ``timeline_data`` turns executions
(`nbdist.events.Execution`) into the columns of the timeline's bars. The figure builder only
hands those columns to bokeh.

Timeline: one row per worker ("node · pid"), one bar per execution from its start to its end
(running ones up to now), coloured by outcome; the hover shows name, duration, state, task id.
At most ``MAX_BARS`` (the most recent) are drawn, so a 100,000-task run stays light in the page.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from nbdist.events import FAILED, FINISHED, RETRIED, RUNNING, Execution

PENDING, SCHEDULED = "pending", "scheduled"
COLORS = {FINISHED: "#3a9c3a", FAILED: "#d62728", RETRIED: "#ff7f0e", RUNNING: "#1f77b4",
          SCHEDULED: "#f2c94c", PENDING: "#b0b0b0"}
MAX_BARS = 5_000

Columns = dict[str, list[Any]]

# Frontend connections (`_frontend_session`) whose page has BokehJS (`load_bokeh`).
_loaded_sessions: set[str] = set()


def _short(node_id: str) -> str:
    return node_id[-6:] if len(node_id) > 6 else node_id


def worker_row(node_id: str, pid: int) -> str:
    return f"node {_short(node_id)} · pid {pid}"


def _duration_text(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def timeline_data(runs: Sequence[Execution], now: float | None = None,
                  max_bars: int = MAX_BARS) -> tuple[Columns, list[str], float]:
    """(bar columns, worker rows, time origin): bar times are seconds since the origin, the
    first start among the bars drawn."""
    now = time.time() if now is None else now
    runs = list(runs)[-max_bars:]
    origin = min((r.start for r in runs), default=now)
    cols: Columns = {k: [] for k in ("row", "left", "right", "color", "name", "state",
                                     "duration", "task_id", "pid")}
    rows: set[tuple[str, int]] = set()
    for r in runs:
        end = r.end if r.end is not None else max(now, r.start)
        rows.add((r.node_id, r.worker_pid))
        cols["row"].append(worker_row(r.node_id, r.worker_pid))
        cols["left"].append(r.start - origin)
        cols["right"].append(end - origin)
        cols["color"].append(COLORS.get(r.state, COLORS[PENDING]))
        cols["name"].append(r.name)
        cols["state"].append(r.state + (f" ({r.error_type})" if r.error_type else ""))
        cols["duration"].append(_duration_text(end - r.start))
        cols["task_id"].append(r.task_id)
        cols["pid"].append(r.worker_pid)
    return cols, [worker_row(n, p) for n, p in sorted(rows)], origin


def timeline_figure(runs: Sequence[Execution], now: float | None = None,
                    total: int | None = None) -> Any:
    """The bokeh timeline of ``runs`` (``total``: how many the record holds, for the title)."""
    from bokeh.models import ColumnDataSource, FactorRange, HoverTool
    from bokeh.plotting import figure

    cols, rows, _ = timeline_data(runs, now)
    shown = len(cols["row"])
    total = shown if total is None else total
    title = f"nbdist timeline: {shown} task executions" + (
        f" (the last {shown} of {total})" if total > shown else "")
    factors = list(reversed(rows)) or ["(no tasks yet)"]
    fig = figure(y_range=FactorRange(factors=factors), title=title,
                 height=min(900, 90 + 28 * max(1, len(rows))), sizing_mode="stretch_width",
                 x_axis_label="seconds since the first task shown",
                 tools="xpan,xwheel_zoom,box_zoom,reset,save", active_scroll="xwheel_zoom")
    source = ColumnDataSource(cols, name="nbdist_timeline")
    fig.hbar(y="row", left="left", right="right", height=0.8, fill_color="color",
             line_color="color", source=source)
    fig.add_tools(HoverTool(tooltips=[("task", "@name"), ("duration", "@duration"),
                                      ("state", "@state"), ("worker", "@pid"),
                                      ("task id", "@task_id")]))
    fig.ygrid.grid_line_color = None
    return fig


def html_of(fig: Any) -> str:
    """The figure as an HTML fragment (a div and the script that fills it); BokehJS must be
    loaded in the page (``load_bokeh()``)."""
    from bokeh.embed import components

    script, div = components(fig)
    return f"{div}\n{script}"


def _frontend_session() -> str | None:
    """The session id of the frontend connection that sent the current cell (a page reload or
    another notebook attached to this kernel gets a new one); None outside a kernel."""
    from IPython import get_ipython

    kernel = getattr(get_ipython(), "kernel", None)
    if kernel is None:
        return None
    header = (kernel.get_parent() or {}).get("header") or {}
    return header.get("session") or None


def load_bokeh() -> None:
    """Load BokehJS into the page of the current cell, from the installed bokeh package.

    The code travels inline in the output, so the page never reaches bokeh's CDN (many notebook
    users are offline or behind a proxy). It weighs over a megabyte, so it is sent once per
    frontend connection: again after a page reload (a new connection) or a kernel restart (this
    module's memory is gone), not with every figure. Only the core bundle is sent: the figures
    here use no widgets, tables, WebGL or MathJax.
    """
    from bokeh.io import output_notebook
    from bokeh.resources import INLINE

    session = _frontend_session()
    if session is not None and session in _loaded_sessions:
        return
    output_notebook(resources=INLINE.clone(components=["bokeh"]), hide_banner=True)
    if session is not None:
        _loaded_sessions.add(session)


def show_timeline(runs: Sequence[Execution], total: int | None = None) -> None:
    """Display the timeline inline in the current cell (bokeh's notebook display)."""
    from bokeh.io import show

    load_bokeh()
    show(timeline_figure(runs, total=total))

"""The panel under a 100,000-task run: frame rate while the user pans and zooms, and how far
the view is behind the kernel. Browser-side timings, taken in a real JupyterLab in Debian's
headless Chromium (the same set-up as tests/browser).

    python benchmarks/panel_scale.py [--tasks 100000] [--cpus 2] [--view panel|inline]
                                     [--tree DIR] [--profile FILE]

``--view panel`` (the default) measures the JupyterLab panel; ``--view inline`` the inline
widget of ``nbdist.show()``, displayed in the notebook's cell before the run (the panel
stays closed), with the same interaction on its graph and the same figures: it draws the
panel's board, and its messages (the widget's custom messages) are the panel's, with the
same time stamps. The widget's graph is scrolled into view before the baseline and again
once the run's cell is added (JupyterLab does not render cells out of view). When the run's
cell ends, the kernel writes the widget's output again (its static form follows the state), and
JupyterLab then draws a new view of the widget: its catch-up is that of the view on screen
(the new one, from its first snapshot, if the old one had not caught up), and
``view_replaced_by_the_end`` says whether this happened before the interaction stopped.

``--cells N`` runs N small cells (5 tasks each) after the view is up and before the run, as
in a notebook in use (each rewrites the inline view's output, see above).

``--tree DIR`` runs nbdist from another checkout (a git worktree of an older commit): the
kernel, and so the cluster it starts, import it (first on PYTHONPATH), and JupyterLab serves
that checkout's prebuilt panel (its ``nbdist/labextension`` first on JUPYTER_PATH). The output
names the nbdist the kernel imported and the panel bundle the page loaded. A checkout from
before issue 27 has the older inline view (ipywidgets and bokeh figures; ``nbdist.show()``
from nbdist/jupyter/liveview.py): there the harness drags and wheels the graph's bokeh figure
(bokeh's pan tool; its wheel zoom is not active unless picked in its toolbar, so the wheel
steps do nothing), and, since that view's messages carry no kernel time, reports instead of
lag and "behind" the gaps between its renders (its summary's count of finished tasks
changing), the counts it showed, and the gaps between its widget updates' arrivals; its
catch-up is the summary showing every task finished.

What runs: a notebook cell submits a three-stage DAG (``inc`` -> ``double`` -> ``pair``, 40% /
40% / 20% of the tasks) and ``get``s every result. Meanwhile, in the page:

- **idle baseline**: the same interaction for 5 s before the run, with nothing running: on a
  shared machine this shows what the page gets at all;
- **interaction**: every animation frame dispatches a pointer drag step (and every 10th frame
  a Ctrl+wheel zoom) on the graph's canvas, so the graph is redrawn each frame as a user
  dragging it would cause; the intervals between frames give the frame rate;
- **lag**: each time the panel finishes rendering a kernel message, ``now - message time``
  (the kernel stamps each snapshot/delta with its wall clock when it takes it; kernel and
  browser share this machine's clock);
- **behind**: just before each render, ``now - the time of the message on screen until then``:
  how far behind the kernel the view was at its stalest (it includes the time between
  messages, so it is the figure to hold against "at most ~250 ms behind");
- **behind, as of**: the same, counted from the message's ``as_of`` (the kernel's time by
  which every event record published is in the message) instead of the time it was taken:
  records still waiting to be applied then count as behind too;
- **behind the kernel's news**: just before each render, ``now - news_since`` of the message
  being rendered (every record it brings was published after that time): how long the oldest
  news it brings waited, from the kernel to the screen. Until then the view showed the
  kernel's state as of that news; unlike "as of", this does not count time in which the
  kernel had nothing new to say (its own garbage collection pauses);
- **arrival**: the same difference when each message reaches the page (before the panel handles
  it): the part of the lag spent in the kernel, the server and the websocket;
- **as of age at send**: for each message, its time stamp less its ``as_of``: how long the
  newest records it reflects had waited in the kernel (the event stream's batching and the
  bridge applying them) when it was taken;
- **kernel cadence**: the gaps between the kernel's stamps of successive messages (a
  message's stamp is its arrival less its lag): the part of "behind" spent in the kernel
  before a message leaves;
- **behind, as of, in parts**: for each render, its "behind, as of" split into the kernel's
  turn (the message's ``as_of`` less the one before's), the taking of the message (its time
  stamp less its ``as_of``), the way to the page (arrival less time stamp) and the page's own
  time (render less arrival); the renders over 250 ms are listed with their parts;
- **render gaps**: the time between successive renders of a new kernel state (the one figure
  of freshness the inline view before issue 27 has too, see ``--tree``);
- **the kernel's full garbage collections** during the run (the cell watches them);
- **CPU share by process group** (chromium, kernel, cluster, Jupyter server) from the run's
  start until the view caught up, and whether Linux's autogroup scheduling is on: then each
  session (the kernel, the cluster, Chromium: each is started in a session of its own) gets an
  equal share of a saturated machine, whatever the processes' nice values;
- **catch-up**: the cell prints the kernel's clock when ``get`` returned; the time until the
  panel shows every task finished is the view's delay at the end of the run.

Prints one JSON object with the figures, the machine's core count and its load average (other
processes on a 2-core machine take frames away from the browser), and the page's long tasks
(over 100 ms) during the run; then, on stderr, the issue's two goals against this run. ``--profile FILE`` also samples the page's JavaScript during the
run (Chrome's CPU profiler: load FILE in the browser's Performance tab) and adds the functions
with the most self time to the output.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# lab_session (tests/browser) waits with tests/polling.py.
for folder in ("tests", "tests/browser"):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / folder))

from lab_session import (  # noqa: E402
    LabServer,
    NotebookPage,
    launch_chromium,
    remove_tree,
    temp_root,
    write_notebook,
)

BASELINE_S = 5

INSTRUMENT = """(root) => {
    const panel = document.querySelector(root);
    const canvas = panel.querySelector('.nbdist-graph-canvas');
    const rect = canvas.getBoundingClientRect();
    const x = rect.left + rect.width / 2, y = rect.top + rect.height / 2;
    const b = window.__bench = {frames: [], lags: [], running: true, step: 0, root: panel};
    const opts = (dx) => ({bubbles: true, clientX: x + dx, clientY: y, pointerId: 1,
                           buttons: 1});
    canvas.dispatchEvent(new PointerEvent('pointerdown', opts(0)));
    const frame = (t) => {
        if (!b.running) { return; }
        b.frames.push(performance.timeOrigin + t);
        b.step++;
        // A drag back and forth, 12 px per frame, and now and then a zoom step.
        const dx = 12 * ((Math.floor(b.step / 40) % 2) ? -1 : 1) * (b.step % 40);
        canvas.dispatchEvent(new PointerEvent('pointermove', opts(dx)));
        if (b.step % 10 === 0) {
            canvas.dispatchEvent(new WheelEvent('wheel', {bubbles: true, cancelable: true,
                ctrlKey: true, clientX: x, clientY: y, deltaY: (b.step % 20 === 0) ? 60 : -60}));
        }
        requestAnimationFrame(frame);
    };
    requestAnimationFrame(frame);
    // When each kernel message arrived in the page (before the panel saw it), to split the
    // lag into transport (kernel -> server -> websocket) and the page's own time.
    b.received = [];
    // How old each message's "as of" was when the kernel took it (records not applied yet).
    b.stale = [];
    // The kernel's "as of" of each message (every record published before it is in it), by
    // the message's time stamp.
    const asOf = new Map();
    const news = new Map();
    const arrived = new Map();
    const nb = window.jupyterapp.shell.widgets('main').find(w => w.sessionContext && w.content);
    nb.sessionContext.session.kernel.anyMessage.connect((_, args) => {
        const msg = args.msg;
        // The panel's comm carries the message as its data; the inline widget's, as the
        // content of a widget's custom message.
        const outer = msg.content && msg.content.data;
        const data = outer && outer.method === 'custom' ? outer.content : outer;
        if (args.direction === 'recv' && msg.header.msg_type === 'comm_msg'
                && data && data.time) {
            b.received.push([Date.now() / 1000, Date.now() / 1000 - data.time]);
            arrived.set(Number(data.time), Date.now() / 1000);
            if (data.news_since) {
                news.set(Number(data.time), Number(data.news_since));
            }
            if (data.as_of) {
                asOf.set(Number(data.time), Number(data.as_of));
                b.stale.push([Date.now() / 1000, Number(data.time) - Number(data.as_of)]);
            }
        }
    });
    b.longtasks = [];
    new PerformanceObserver((list) => {
        for (const e of list.getEntries()) {
            b.longtasks.push([(performance.timeOrigin + e.startTime) / 1000, e.duration]);
        }
    }).observe({type: 'longtask'});
    // Until this render the view showed the state of the previous message: how far behind the
    // kernel the view was just before it caught up again.
    b.behind = [];
    b.behindAsOf = [];
    b.behindNews = [];
    b.parts = [];
    let shown = 0;
    new MutationObserver(() => {
        const t = Number(panel.dataset.renderedTime);
        const now = Date.now() / 1000;
        if (t > 0) { b.lags.push([now, now - t]); }
        if (t > 0 && t !== shown && news.has(t)) { b.behindNews.push([now, now - news.get(t)]); }
        if (t > 0 && shown > 0 && t !== shown) {
            b.behind.push([now, now - shown]);
            if (asOf.has(shown)) {
                b.behindAsOf.push([now, now - asOf.get(shown)]);
                if (asOf.has(t) && arrived.has(t)) {
                    b.parts.push([now, now - asOf.get(shown), asOf.get(t) - asOf.get(shown),
                                  t - asOf.get(t), arrived.get(t) - t, now - arrived.get(t)]);
                }
            }
        }
        if (t > 0) { shown = t; }
    }).observe(panel, {attributes: true, attributeFilter: ['data-rendered-time']});
}"""

# In-page: whether an element is at least partly inside the window (drawn, for a user to see).
ON_SCREEN = """const onScreen = (el) => {
        const r = el ? el.getBoundingClientRect() : null;
        return !!r && r.height > 0 && r.bottom > 0 && r.top < window.innerHeight;
    };"""

STOP = """(root) => {
    """ + ON_SCREEN + """
    const b = window.__bench;
    b.running = false;
    const canvas = b.root.querySelector('.nbdist-graph-canvas');
    canvas.dispatchEvent(new PointerEvent('pointerup', {bubbles: true, pointerId: 1}));
    // The measured graph's zoom when the interaction stopped (the zoom steps reached it).
    const zoomed = b.root.querySelector('[data-scale]');
    return {frames: b.frames, lags: b.lags, received: b.received, longtasks: b.longtasks,
            behind: b.behind, behindAsOf: b.behindAsOf, behindNews: b.behindNews,
            stale: b.stale, parts: b.parts, scale: zoomed ? zoomed.dataset.scale : null,
            // Whether the view measured was replaced by a new one (its output re-rendered).
            replaced: document.querySelector(root) !== b.root,
            onScreen: onScreen(document.querySelector(root + ' .nbdist-graph-canvas'))};
}"""

ALL_FINISHED = """([n, root]) => {
    let finished = 0;
    for (const el of document.querySelectorAll(root + ' [data-task-count]')) {
        if (!['inc', 'double', 'pair'].includes(el.dataset.taskName)) { continue; }
        const counts = el.textContent.match(/(\\d+) finished/);
        finished += counts ? Number(counts[1]) : 0;
    }
    return finished >= n ? Date.now() / 1000 : false;
}"""


# The views measured (``--view``): the panel's root, or the inline widget's in a cell's output.
PANEL = "#nbdist-panel"
INLINE = ".jp-OutputArea-output .nbdist-inline.nbdist-widget"

# The inline view of a tree before issue 27 (``nbdist.show()`` as ipywidgets and bokeh
# figures, nbdist/jupyter/liveview.py): its graph is a bokeh figure, re-sent as a new HTML
# fragment at most once a second, and its messages are ipywidgets' state updates, which carry
# no kernel time. Measured: the frame rate while dragging (bokeh's pan tool) and zooming
# (wheel) the graph, the times its summary line changed (the view's renders of the kernel's
# counts) and the count it showed, the arrival of its updates, long tasks.
LEGACY_GRAPH = """() => {
    // The task graph is the view's first bokeh figure; its pointer events go to the hit area
    // of its canvas, two shadow roots down. The figure is replaced when re-sent: looked up
    // again every frame.
    const fig = document.querySelector('.jp-OutputArea-output .bk-Figure');
    const canvas = fig && fig.shadowRoot && fig.shadowRoot.querySelector('.bk-Canvas');
    return canvas && canvas.shadowRoot && canvas.shadowRoot.querySelector('.bk-events');
}"""

LEGACY_INSTRUMENT = """() => {
    const target = """ + LEGACY_GRAPH + """;
    const summary = () => document.querySelector('.nbdist-liveview-summary');
    const b = window.__bench = {frames: [], running: true, step: 0, renders: [], updates: [],
                                longtasks: [], retargets: 0};
    let el = null, x = 0, y = 0;
    const opts = (dx) => ({bubbles: true, composed: true, clientX: x + dx, clientY: y,
                           pointerId: 1, pointerType: 'mouse', isPrimary: true, buttons: 1});
    const grab = () => {
        const t = target();
        if (t && t !== el) {
            el = t;
            b.retargets++;
            const rect = el.getBoundingClientRect();
            x = rect.left + rect.width / 2;
            y = rect.top + rect.height / 2;
            el.dispatchEvent(new PointerEvent('pointerdown', opts(0)));
        }
    };
    const frame = (t) => {
        if (!b.running) { return; }
        b.frames.push(performance.timeOrigin + t);
        b.step++;
        grab();
        if (el) {
            const dx = 12 * ((Math.floor(b.step / 40) % 2) ? -1 : 1) * (b.step % 40);
            el.dispatchEvent(new PointerEvent('pointermove', opts(dx)));
            if (b.step % 10 === 0) {
                el.dispatchEvent(new WheelEvent('wheel', {bubbles: true, composed: true,
                    cancelable: true, clientX: x, clientY: y,
                    deltaY: (b.step % 20 === 0) ? 60 : -60}));
            }
        }
        requestAnimationFrame(frame);
    };
    requestAnimationFrame(frame);
    const nb = window.jupyterapp.shell.widgets('main').find(w => w.sessionContext && w.content);
    nb.sessionContext.session.kernel.anyMessage.connect((_, args) => {
        const msg = args.msg, data = msg.content && msg.content.data;
        if (args.direction === 'recv' && msg.header.msg_type === 'comm_msg' && data
                && data.method === 'update') {
            b.updates.push(Date.now() / 1000);
        }
    });
    new PerformanceObserver((list) => {
        for (const e of list.getEntries()) {
            b.longtasks.push([(performance.timeOrigin + e.startTime) / 1000, e.duration]);
        }
    }).observe({type: 'longtask'});
    // A render: the summary shows a new count of finished tasks.
    let shown = -1;
    new MutationObserver(() => {
        const s = summary();
        const m = s && s.textContent.match(/(\\d+) finished/);
        const n = m ? Number(m[1]) : -1;
        if (n !== shown) {
            shown = n;
            b.renders.push([Date.now() / 1000, n]);
        }
    }).observe(document.querySelector('.jp-Notebook'),
               {childList: true, subtree: true, characterData: true});
}"""

LEGACY_STOP = """() => {
    """ + ON_SCREEN + """
    const b = window.__bench;
    b.running = false;
    return {frames: b.frames, renders: b.renders, updates: b.updates, longtasks: b.longtasks,
            retargets: b.retargets, onScreen: onScreen((""" + LEGACY_GRAPH + """)())};
}"""

LEGACY_ALL_FINISHED = """(n) => {
    const s = document.querySelector('.nbdist-liveview-summary');
    const m = s && s.textContent.match(/(\\d+) finished/);
    return m && Number(m[1]) >= n ? Date.now() / 1000 : false;
}"""


def workload(n: int) -> str:
    a, b = int(n * 0.4), int(n * 0.4)
    c = n - a - b
    return f"""
@nbdist.remote
def inc(i):
    return i + 1

@nbdist.remote
def double(x):
    return 2 * x

@nbdist.remote
def pair(x, y):
    return x + y

import gc, json
_gc_start, _gc_full = [0.0], []
def _gc_watch(phase, info):  # the kernel's full collections during the run: (at, seconds)
    if phase == "start":
        _gc_start[0] = time.time()
    elif info["generation"] == 2:
        _gc_full.append((_gc_start[0], time.time() - _gc_start[0]))
gc.callbacks.append(_gc_watch)
t0 = time.time()
incs = [inc.remote(i) for i in range({a})]
doubles = [double.remote(r) for r in incs[:{b}]]
pairs = [pair.remote(doubles[k % {b}], doubles[(k + 1) % {b}]) for k in range({c})]
nbdist.get(incs + doubles + pairs)
t1 = time.time()
gc.callbacks.remove(_gc_watch)
print("KERNEL_GC", json.dumps([[round(at - t0, 3), round(s, 4)] for at, s in _gc_full]))
print(f"KERNEL_DONE {{t1:.3f}} {{t1 - t0:.3f}}")
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def parts_stats(parts: list[list[float]], window: tuple[float, float]) -> dict[str, Any]:
    """Where "behind, as of" went, render by render: the kernel's turn (as_of of the message
    less that of the one before), its taking (time stamp less as_of), the way to the page
    (arrival less time stamp) and the page (render less arrival)."""
    during = [p for p in parts if window[0] <= p[0] <= window[1]]
    names = ["behind", "turn", "taking", "transit", "page"]
    return {
        "median_ms": {n: round(1000 * percentile([p[i + 1] for p in during], 0.5))
                      for i, n in enumerate(names)},
        "p95_ms": {n: round(1000 * percentile([p[i + 1] for p in during], 0.95))
                   for i, n in enumerate(names)},
        # [s into the run, then the parts in ms]
        "over_250ms": [[round(p[0] - window[0], 2), *(round(1000 * v) for v in p[1:])]
                       for p in during if p[1] > 0.25],
    }


def frame_stats(frames: list[float], window: tuple[float, float]) -> dict[str, Any]:
    """Frame figures for the frames (epoch ms) inside ``window`` (epoch s)."""
    frames = [f for f in frames if window[0] * 1000 <= f <= window[1] * 1000]
    intervals = [b - a for a, b in zip(frames, frames[1:], strict=False)]
    seconds = (frames[-1] - frames[0]) / 1000 if len(frames) > 1 else 0
    return {
        "frames": len(frames),
        "fps_mean": round((len(frames) - 1) / seconds, 1) if seconds else None,
        "frame_ms_median": round(percentile(intervals, 0.5), 1),
        "frame_ms_p95": round(percentile(intervals, 0.95), 1),
        "frame_ms_p99": round(percentile(intervals, 0.99), 1),
        "frame_ms_max": round(max(intervals), 1) if intervals else None,
        "frames_over_33ms_pct": round(100 * sum(i > 33.4 for i in intervals)
                                      / max(1, len(intervals)), 2),
        "long_frames_over_100ms": sum(i > 100 for i in intervals),
    }


def lag_stats(lags: list[list[float]], window: tuple[float, float]) -> dict[str, Any]:
    during = [lag for at, lag in lags if window[0] <= at <= window[1]]
    return {
        "renders_during_run": len(during),
        # When, in seconds into the run, the view was more than 250 ms behind, and by how much.
        "lag_over_250ms": [[round(at - window[0], 2), round(1000 * lag)] for at, lag in lags
                           if window[0] <= at <= window[1] and lag > 0.25],
        "lag_ms_median": round(1000 * percentile(during, 0.5)),
        "lag_ms_p95": round(1000 * percentile(during, 0.95)),
        "lag_ms_max": round(1000 * max(during)) if during else None,
    }


def cadence_stats(received: list[list[float]], window: tuple[float, float]) -> dict[str, Any]:
    """Gaps between the kernel's stamps of successive messages of the run (a message's stamp
    is its arrival less its lag): the part of "behind" spent before a message leaves."""
    stamps = sorted(at - lag for at, lag in received if window[0] <= at <= window[1])
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    return {
        "messages": len(stamps),
        "gap_ms_median": round(1000 * percentile(gaps, 0.5)),
        "gap_ms_p95": round(1000 * percentile(gaps, 0.95)),
        "gap_ms_max": round(1000 * max(gaps)) if gaps else None,
        "gaps_over_250ms": sum(g > 0.25 for g in gaps),
    }


def top_functions(profile: dict[str, Any], n: int = 15) -> list[list[Any]]:
    """The ``n`` functions with the most self time in a CPU profile: [ms, name, url:line]."""
    nodes = {node["id"]: node for node in profile["nodes"]}
    self_us: dict[int, float] = {}
    samples, deltas = profile.get("samples", []), profile.get("timeDeltas", [])
    for sample, delta in zip(samples, deltas, strict=False):
        self_us[sample] = self_us.get(sample, 0.0) + delta
    by_fn: dict[tuple[str, str], float] = {}
    for node_id, us in self_us.items():
        frame = nodes[node_id]["callFrame"]
        key = (frame["functionName"] or "(anonymous)",
               f"{frame['url'].rsplit('/', 1)[-1]}:{frame['lineNumber'] + 1}")
        by_fn[key] = by_fn.get(key, 0.0) + us
    ranked = sorted(by_fn.items(), key=lambda kv: -kv[1])[:n]
    return [[round(us / 1000), name, where] for (name, where), us in ranked]


def cpu_by_group() -> dict[str, float]:
    """CPU seconds used so far by this machine's processes, by what they are (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        group = ("chromium" if "chromium" in cmd else
                 "kernel" if "ipykernel_launcher" in cmd else
                 "cluster" if "nbdist." in cmd else
                 "jupyter server" if "jupyterlab" in cmd or "jupyter-lab" in cmd else
                 "benchmark (playwright)" if "panel_scale" in cmd or "playwright" in cmd
                 else "other")
        out[group] = out.get(group, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def goals(result: dict[str, Any]) -> str:
    """The issue's two figures against this run, in words (on stderr, after the JSON)."""
    fps = result["run_interaction"]["fps_mean"] or 0.0
    if "behind_as_of" not in result:  # the inline view before issue 27: no kernel times
        return (f"interaction {fps} fps: goal >= 30 {'met' if fps >= 30 else 'NOT met'}\n"
                "view behind the kernel: not measurable for this view (its messages carry "
                "no kernel time); renders "
                f"{result['render_gap_ms_median']} ms apart at the median, "
                f"{result['render_gap_ms_p95']} ms at p95")
    behind = result["behind_as_of"]
    p95, median = behind["as_of_lag_ms_p95"], behind["as_of_lag_ms_median"]
    over = len(behind["as_of_lag_over_250ms"])
    renders = behind["as_of_renders_during_run"]
    return (f"interaction {fps} fps: goal >= 30 {'met' if fps >= 30 else 'NOT met'}\n"
            f"view behind the kernel (as of), median {median} ms, p95 {p95} ms, "
            f"{over} of {renders} renders over 250 ms: goal at most ~250 ms "
            + ("met at p95" if p95 <= 250 else
               "met at the median, NOT at p95" if median <= 250 else "NOT met"))


def autogroup() -> bool | None:
    """Whether the Linux scheduler shares the CPU between sessions first (None: unknown)."""
    try:
        return Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    except OSError:
        return None


def metrics(cdp: Any) -> dict[str, float]:
    """Chromium's cumulative main-thread counters (seconds)."""
    return {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}


def use_tree(tree: Path, root: Path) -> str:
    """Run the kernel (and so the cluster it starts) from another checkout of nbdist, with that
    checkout's prebuilt panel: its folder first on the kernel's PYTHONPATH, its
    ``nbdist/labextension`` first on JupyterLab's extension path (the first one found of a
    name is the one served). Returns the checkout's commit."""
    share = root / ".tree-share"
    shutil.copytree(tree / "nbdist" / "labextension",
                    share / "labextensions" / "nbdist-panel")
    install = tree / "labextension" / "install.json"
    if install.exists():
        shutil.copy(install, share / "labextensions" / "nbdist-panel" / "install.json")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])
    os.environ["JUPYTER_PATH"] = os.pathsep.join(
        [str(share), *filter(None, [os.environ.get("JUPYTER_PATH")])])
    return subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=False).stdout.strip()


def legacy_inline(tree: Path | None) -> bool:
    """Whether ``nbdist.show()`` of the tree is the inline view before issue 27."""
    jupyter = (tree or Path(__file__).resolve().parents[1]) / "nbdist" / "jupyter"
    return not (jupyter / "widget.py").exists() and (jupyter / "liveview.py").exists()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--view", choices=("panel", "inline"), default="panel",
                        help="the JupyterLab panel, or the inline widget of nbdist.show() in "
                             "the notebook (the panel closed)")
    parser.add_argument("--tree", metavar="DIR", type=Path,
                        help="run nbdist (kernel, cluster, panel) from this checkout, e.g. a "
                             "git worktree of an older commit")
    parser.add_argument("--cells", type=int, default=0,
                        help="run this many small cells of 5 tasks each after the view is "
                             "up and before the run (a notebook in use)")
    parser.add_argument("--profile", metavar="FILE",
                        help="write the page's CPU profile during the run (.cpuprofile)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    root = temp_root("nbdist-bench-")
    server = None
    playwright = sync_playwright().start()
    try:
        tree = use_tree(args.tree.resolve(), root) if args.tree else "this checkout"
        legacy = args.view == "inline" and legacy_inline(args.tree)
        server = LabServer.start(root)
        write_notebook(root / "bench.ipynb", [])
        context = launch_chromium(playwright, root / ".lab" / "chromium-profile")
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.set_default_timeout(120_000)
            nb = NotebookPage(page, Path("test-artifacts") / "benchmarks", "bench.ipynb")
            nb.open(server.notebook_url("bench.ipynb"))
            nb.run_cell(f"import nbdist, time\nnbdist.init(num_cpus={args.cpus})\n"
                        "print('NBDIST_FROM', nbdist.__file__)")
            source = page.locator(".jp-OutputArea-output", has_text="NBDIST_FROM").last
            nbdist_from = source.inner_text().split("NBDIST_FROM", 1)[1].strip()
            if args.view == "panel":
                nb.open_panel()
                page.wait_for_selector(f'{PANEL}[data-cluster="true"]')
                view = PANEL
            else:
                nb.run_cell("view = nbdist.show()")
                view = INLINE
            for i in range(args.cells):  # a notebook in use: cells run since the view
                nb.run_cell(("@nbdist.remote\ndef _earlier(i):\n    return i\n\n" if i == 0
                             else "") + "nbdist.get([_earlier.remote(i) for i in range(5)])")
            if args.view == "inline":
                if legacy:
                    page.wait_for_function(LEGACY_GRAPH)
                else:
                    page.wait_for_selector(f'{INLINE}[data-cluster="true"]')
                # The graph in view, as for a user watching it (JupyterLab skips rendering
                # cells out of view).
                keep_in_view(page, legacy)
            cdp = context.new_cdp_session(page)
            cdp.send("Performance.enable")
            page.evaluate(LEGACY_INSTRUMENT if legacy else INSTRUMENT,
                          None if legacy else view)
            # The same interaction with nothing running: what this machine gives the page.
            idle_from = time.time()
            page.wait_for_timeout(BASELINE_S * 1000)
            idle_to = time.time()
            before = metrics(cdp)
            if args.profile:
                cdp.send("Profiler.enable")
                cdp.send("Profiler.setSamplingInterval", {"interval": 1000})
                cdp.send("Profiler.start")
            cpu_before = cpu_by_group()
            started = time.time()
            nb.run_cell(workload(args.tasks), wait=False)
            if args.view == "inline":
                keep_in_view(page, legacy)
            nb.wait_run(timeout=900)
            done_line = page.locator(".jp-OutputArea-output", has_text="KERNEL_DONE").last
            printed = dict(line.split(None, 1) for line in done_line.inner_text().splitlines()
                           if line.startswith("KERNEL_"))
            kernel_done, kernel_s = printed["KERNEL_DONE"].split()
            kernel_gc = json.loads(printed["KERNEL_GC"])
            if legacy:
                shown = page.wait_for_function(LEGACY_ALL_FINISHED,
                                               arg=args.tasks + 5 * args.cells,
                                               timeout=60_000)
            else:
                shown = page.wait_for_function(ALL_FINISHED, arg=[args.tasks, view],
                                               timeout=60_000)
            view_done = float(shown.json_value())
            cpu_after = cpu_by_group()
            data = page.evaluate(LEGACY_STOP) if legacy else page.evaluate(STOP, view)
            after = metrics(cdp)
            profile = cdp.send("Profiler.stop")["profile"] if args.profile else None
            nb.screenshot(f"{args.view}-{args.tasks}" + ("-legacy" if legacy else ""))
            run = (started, float(kernel_done))
            # Which build of the panel's extension the page loaded (its entry's name).
            bundle = page.evaluate("""() => performance.getEntriesByType('resource')
                .map(e => e.name).filter(n => n.includes('/nbdist-panel/'))
                .map(n => n.split('/').pop()).filter(n => n.startsWith('remoteEntry'))""")
            result: dict[str, Any] = {
                "view": args.view + (" (ipywidgets + bokeh, before issue 27)" if legacy
                                     else ""),
                "tree": tree, "nbdist_from": nbdist_from, "panel_bundle": bundle,
                "idle_interaction": frame_stats(data["frames"], (idle_from, idle_to)),
                "run_interaction": frame_stats(data["frames"], run),
                # The kernel's full garbage collections during the run: [s into it, s long].
                "kernel_full_gc": kernel_gc,
            }
            result.update(legacy_figures(data, run) if legacy else board_figures(data, run,
                                                                                 started))
            wall = after["Timestamp"] - before["Timestamp"]
            result.update({
                "main_thread_busy_pct": round(100 * (after["TaskDuration"]
                                                     - before["TaskDuration"]) / wall, 1),
                "script_pct": round(100 * (after["ScriptDuration"]
                                           - before["ScriptDuration"]) / wall, 1),
                "load_average_1m_after": os.getloadavg()[0],
                "sched_autogroup": autogroup(),
                # Of the machine's cores, from the run's start until the view caught up.
                "cpu_share_pct_by_group": {
                    k: round(100 * (cpu_after[k] - cpu_before.get(k, 0.0))
                             / (view_done - started) / (os.cpu_count() or 1), 1)
                    for k in sorted(cpu_after)},
                "tasks": args.tasks, "cells_before": args.cells, "cores": os.cpu_count(),
                "cluster_cpus": args.cpus,
                "kernel_run_s": float(kernel_s),
                "view_caught_up_ms_after_get_returned": round(
                    1000 * (view_done - float(kernel_done))),
                "long_tasks_over_100ms": [
                    [round(at - started, 2), round(ms)] for at, ms in data["longtasks"]
                    if ms > 100 and started <= at <= view_done],
            })
            if profile is not None:
                Path(args.profile).write_text(json.dumps(profile))
                result["top_self_time_ms"] = top_functions(profile)
            print(json.dumps(result, indent=2))
            print(goals(result), file=sys.stderr)
        finally:
            context.close()
    finally:
        playwright.stop()
        if server is not None:
            server.stop()
        remove_tree(root)


def keep_in_view(page: Any, legacy: bool) -> None:
    """Scroll the inline view's graph into the middle of the notebook's viewport."""
    page.evaluate("""([legacy, inline]) => {
        const graph = legacy ? document.querySelector('.jp-OutputArea-output .bk-Figure')
            : document.querySelector(inline + ' .nbdist-graph-canvas');
        graph.scrollIntoView({block: 'center'});
    }""", [legacy, INLINE])


def board_figures(data: dict[str, Any], run: tuple[float, float],
                  started: float) -> dict[str, Any]:
    """The figures of the panel's board (the panel, or the inline widget drawing it)."""
    return {
        **lag_stats(data["lags"], run),
        # (from the first message of the run on: before it the view had nothing to catch up
        # with)
        "behind": {f"behind_{k}": v for k, v in lag_stats(
            [[at, lag] for at, lag in data["behind"] if at - lag >= started], run).items()},
        # The same, counted from the message's "as of" (records still waiting to be applied
        # when it was taken count as behind too).
        "behind_as_of": {f"as_of_{k}": v for k, v in lag_stats(
            [[at, lag] for at, lag in data["behindAsOf"] if at - lag >= started],
            run).items()},
        "behind_as_of_parts": parts_stats(data["parts"], run),
        "behind_news": {f"news_{k}": v for k, v in lag_stats(
            [[at, lag] for at, lag in data["behindNews"] if at - lag >= started],
            run).items()},
        "received": {f"arrival_{k}": v for k, v in lag_stats(data["received"], run).items()},
        # At the kernel: how old each message's "as of" was when it was taken.
        "as_of_age_at_send": {f"stale_{k}": v for k, v in
                              lag_stats(data["stale"], run).items()},
        "kernel_cadence": cadence_stats(data["received"], run),
        # The figure the inline view before issue 27 has too: how far apart the renders of new
        # kernel states came.
        **render_gaps([at for at, _lag in data["behind"]], run),
        "graph_scale_at_end": data["scale"],
        "view_replaced_by_the_end": data["replaced"],
        "graph_on_screen_at_end": data["onScreen"],
    }


def render_gaps(renders: list[float], run: tuple[float, float]) -> dict[str, Any]:
    """Gaps between the renders (epoch s) of new kernel states during the run."""
    during = sorted(at for at in renders if run[0] <= at <= run[1])
    gaps = [b - a for a, b in zip(during, during[1:], strict=False)]
    return {
        "render_gap_ms_median": round(1000 * percentile(gaps, 0.5)) if gaps else None,
        "render_gap_ms_p95": round(1000 * percentile(gaps, 0.95)) if gaps else None,
        "render_gap_ms_max": round(1000 * max(gaps)) if gaps else None,
    }


def legacy_figures(data: dict[str, Any], run: tuple[float, float]) -> dict[str, Any]:
    """What the inline view before issue 27 lets us measure: its messages carry no kernel
    time, so there is no lag or "behind"; instead the gaps between its renders (the summary's
    count of finished tasks changing) and between its updates' arrivals."""
    renders = [at for at, _n in data["renders"] if run[0] <= at <= run[1]]
    updates = [at for at in data["updates"] if run[0] <= at <= run[1]]
    update_gaps = [b - a for a, b in zip(updates, updates[1:], strict=False)]
    return {
        "lag": "not measurable: the view's messages (ipywidgets state updates) carry no "
               "kernel time",
        "renders_during_run": len(renders),
        **render_gaps(renders, run),
        # [s into the run, finished tasks shown]
        "finished_shown": [[round(at - run[0], 2), n] for at, n in data["renders"]
                           if run[0] <= at <= run[1] + 60],
        "widget_updates_during_run": len(updates),
        "update_gap_ms_p95": (round(1000 * percentile(update_gaps, 0.95)) if update_gaps
                              else None),
        "update_gap_ms_max": round(1000 * max(update_gaps)) if update_gaps else None,
        "graph_figures_replaced": data["retargets"],
        "graph_on_screen_at_end": data["onScreen"],
    }


if __name__ == "__main__":
    main()

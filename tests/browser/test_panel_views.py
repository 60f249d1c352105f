"""The panel at its default split beside a notebook, after each teaching notebook.

The panel is opened the way a new user does (command palette, from a notebook: it splits the
main area to the notebook's right) in a 1600x1000 window, and stays at that width. Each teaching
notebook (notebooks/00..03) is then run from top to bottom next to it. After each, the panel is
measured rather than only pictured: no text is cut or overlapped (lab_session.LAYOUT_PROBLEMS),
and the graph's canvas is read through the browser's own 2D-context calls (GRAPH_PROBE): every
node drawn is a box at least MIN_NODE_PX tall carrying its name in a readable font. Screenshots
of the panel go to test-artifacts/browser/default-split-*.png.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lab_session import (
    GRAPH_PROBE,
    LAYOUT_PROBLEMS,
    LabServer,
    NotebookPage,
    write_notebook,
)

pytestmark = pytest.mark.timeout(240)

PANEL = "#nbdist-panel"
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"
MIN_NODE_PX = 14
MIN_LABEL_PX = 9.5
# The fills of task and put-object boxes (graphview.STATE_COLORS).
NODE_FILLS = {"#b0b7c3", "#f2c94c", "#2f80ed", "#27ae60", "#eb5757", "#9b51e0"}
LANE_CALLS = 4  # layout.ts LANE_CALLS


@pytest.fixture(scope="module")
def notebook(lab: LabServer, chromium: Any) -> Iterator[NotebookPage]:
    write_notebook(lab.root / "views.ipynb", ["1 + 1"])
    page = chromium.pages[0] if chromium.pages else chromium.new_page()
    page.set_default_timeout(30_000)
    page.add_init_script(GRAPH_PROBE)
    nb = NotebookPage(page, ARTIFACTS, "views.ipynb")
    nb.open(lab.notebook_url("views.ipynb"))
    box = nb.open_panel().bounding_box()
    # What the tests measure is the panel beside a notebook: it opened as a split.
    assert box and 450 <= box["width"] <= 700, box
    page.wait_for_selector(f'{PANEL}[data-link-status="connected"]')
    yield nb


OPEN: list[str] = []  # the teaching notebook open now, if any


def run_teaching_notebook(nb: NotebookPage, lab: LabServer, name: str) -> None:
    """Open notebooks/`name` beside the panel (from views.ipynb) and run all its cells.

    The one a failed test left open is closed first, so its kernel and cluster do not run on.
    """
    while OPEN:
        close_notebook(nb, OPEN[-1])
    copy_without(NOTEBOOKS / name, lab.root / name, DROPPED.get(name, ()))
    OPEN.append(name)
    nb.evaluate("window.jupyterapp.shell.activateById(nb.id);")
    nb.page.evaluate("(path) => window.jupyterapp.commands.execute('docmanager:open', {path})",
                     name)
    nb.wait_kernel_idle(name)
    nb.page.wait_for_function(
        "(name) => { const p = document.querySelector('#nbdist-panel');"
        " return p.dataset.linkStatus === 'connected' &&"
        " p.querySelector('.nbdist-status').textContent.includes(name); }", arg=name)
    ok = nb.evaluate("return await window.jupyterapp.commands.execute("
                     "'notebook:run-all-cells');", name)
    assert ok is True, f"{name} failed"


# What these views measure is the graph a notebook's core draws at the panel's default split:
# tens to hundreds of tasks. The sections below make thousands of tasks (the panel then groups
# them: tests/browser/test_panel_numbers.py), step (test_panel_step_mode.py) or kill processes;
# the notebook tests run them (tests/notebooks), and these copies leave them out.
DROPPED = {
    "02-tasks.ipynb": ("## Step through the tree", "## Tasks that wait together",
                       "## 100,000 tiny tasks", "## `get` in a loop"),
    "03-objects.ipynb": ("## A task graph of numpy arrays",),
    "04-actors.ipynb": ("## Four counters", "## A simulation", "## Async and threaded",
                        "## Named actors", "## When a process dies"),
    # (test_library_notebooks.py) TensorFlow's start-up, and a worker killed on purpose.
    "07-training.ipynb": ("## The same with TensorFlow", "## A worker dies"),
}


def copy_without(src: Path, dst: Path, sections: tuple[str, ...]) -> None:
    """Copy the notebook ``src`` to ``dst`` without the ``## `` sections whose headings start
    with one of ``sections`` (a section runs to the next ``## `` heading)."""
    nb = json.loads(src.read_text(encoding="utf-8"))
    kept, dropping = [], False
    for cell in nb["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and text.startswith("## "):
            dropping = text.startswith(sections)
        if not dropping:
            kept.append(cell)
    assert len(kept) < len(nb["cells"]) or not sections, f"no section of {sections} in {src}"
    nb["cells"] = kept
    dst.write_text(json.dumps(nb), encoding="utf-8")


def close_notebook(nb: NotebookPage, name: str) -> None:
    nb.evaluate("if (nb) { await nb.sessionContext.shutdown(); nb.dispose(); }", name)
    OPEN.remove(name)


def wait_all_done(page: Any, at_least: int) -> int:
    """Wait until the graph lists at least `at_least` tasks and none is still to finish."""
    page.wait_for_function(
        """(n) => {
            const all = document.querySelectorAll('#nbdist-panel [data-task-state]');
            const done = document.querySelectorAll('#nbdist-panel [data-task-state="finished"],'
                + ' #nbdist-panel [data-task-state="failed"]');
            return all.length >= n && done.length === all.length;
        }""", arg=at_least, timeout=60_000)
    return int(page.locator(f"{PANEL} [data-task-state]").count())


def graph(page: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, float]]:
    """The last frame of the graph: node boxes on the canvas, labels, and the canvas size."""
    frame = page.evaluate("() => window.__nbdistGraph()")
    size = {"w": frame["width"], "h": frame["height"]}
    rects = [r for r in frame["records"] if r["kind"] == "rect" and r["color"] in NODE_FILLS
             and r["x"] < size["w"] and r["y"] < size["h"]
             and r["x"] + r["w"] > 0 and r["y"] + r["h"] > 0]
    texts = [t for t in frame["records"] if t["kind"] == "text"]
    return rects, texts, size


def label_in(rect: dict[str, Any], texts: list[dict[str, Any]]) -> dict[str, Any] | None:
    for t in texts:
        if (rect["x"] - 0.5 <= t["x"] and t["x"] + t["w"] <= rect["x"] + rect["w"] + 0.5
                and rect["y"] <= t["y"] <= rect["y"] + rect["h"]):
            return t
    return None


def assert_nodes_readable(page: Any, names: set[str]) -> list[dict[str, Any]]:
    """Every node box on screen is tall enough and carries one of `names`, readably."""
    rects, texts, _ = graph(page)
    assert rects, "no node drawn"
    for r in rects:
        assert r["h"] >= MIN_NODE_PX, f"a node {r['h']:.1f} px tall: {r}"
        label = label_in(r, texts)
        assert label is not None, f"a node without a label: {r}"
        assert label["text"] in names, f"label {label['text']!r} is not one of {names}"
        assert label["size"] >= MIN_LABEL_PX, f"label {label['text']!r} at {label['size']:.1f} px"
    return rects


def assert_layout_reads(page: Any) -> None:
    problems = page.evaluate(LAYOUT_PROBLEMS)
    assert not problems, "\n".join(problems[:20])


def screenshots(nb: NotebookPage, name: str) -> None:
    """The panel as it opens, and scrolled down to the store and workers if the views stack."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    panel = nb.page.locator(PANEL)
    panel.screenshot(path=str(ARTIFACTS / f"default-split-{name}.png"))
    nb.page.evaluate("() => document.querySelector('#nbdist-panel .nbdist-objects')"
                     ".scrollIntoView()")
    panel.screenshot(path=str(ARTIFACTS / f"default-split-{name}-below.png"))
    nb.page.evaluate("() => document.querySelector('#nbdist-panel .nbdist-grid').scrollTo(0, 0)")


def cells(page: Any, selector: str) -> list[tuple[int, int]]:
    return [(int(c), int(r)) for c, r in page.evaluate(
        "(sel) => [...document.querySelectorAll(sel)].map(e => [e.dataset.col, e.dataset.row])",
        f"{PANEL} {selector}")]


def test_quickstart_reads_at_the_default_split(notebook: NotebookPage, lab: LabServer) -> None:
    page = notebook.page
    run_teaching_notebook(notebook, lab, "00-quickstart.ipynb")
    wait_all_done(page, 7)
    page.wait_for_selector(f'{PANEL}[data-cluster="false"]')  # its last cell shuts down
    assert_nodes_readable(page, {"add", "inc", "__init__"})
    assert_layout_reads(page)
    screenshots(notebook, "00-quickstart")
    close_notebook(notebook, "00-quickstart.ipynb")


def test_tasks_notebook_every_node_labelled_and_readable(
        notebook: NotebookPage, lab: LabServer) -> None:
    page = notebook.page
    run_teaching_notebook(notebook, lab, "02-tasks.ipynb")
    n = wait_all_done(page, 24)
    assert n == 24
    # At the default zoom the whole graph is on screen, every node readable.
    rects = assert_nodes_readable(page, {"add", "tree_sum", "divide"})
    assert len(rects) == n, f"{len(rects)} of {n} nodes on screen"

    # The chain (7 adds, each taking the one before) is deep; the tree of the same 8 numbers
    # (4 + 2 + 1 adds) is wide. The list is in submission order: add(1, 2), the chain, the tree.
    adds = cells(page, '[data-task-name="add"]')
    chain, tree = adds[1:8], adds[8:15]
    span = lambda cs: (len({c for c, _ in cs}), len({r for _, r in cs}))  # noqa: E731
    assert span(chain) == (7, 1), chain
    assert span(tree) == (3, 4), tree
    assert_layout_reads(page)
    screenshots(notebook, "02-tasks")


def test_zoom_keeps_the_point_under_the_cursor_and_fit_brings_the_graph_back(
        notebook: NotebookPage) -> None:
    page = notebook.page
    rects, texts, size = graph(page)
    canvas = page.locator(f"{PANEL} .nbdist-graph-canvas").bounding_box()
    # The node nearest the middle of the canvas, a third of the way into it.
    target = min(rects, key=lambda r: math.hypot(r["x"] + r["w"] / 2 - size["w"] / 2,
                                                 r["y"] + r["h"] / 2 - size["h"] / 2))
    px, py = target["x"] + target["w"] / 3, target["y"] + target["h"] / 2
    page.mouse.move(canvas["x"] + px, canvas["y"] + py)
    tooltip = page.locator(f"{PANEL} .nbdist-tooltip")
    tooltip.wait_for(state="visible")
    before = tooltip.inner_text()

    def zoom(delta: int, times: int) -> None:
        for _ in range(times):
            frames = page.evaluate("() => window.__nbdistGraph().frames")
            page.keyboard.down("Control")
            page.mouse.wheel(0, delta)
            page.keyboard.up("Control")
            page.wait_for_function("(n) => window.__nbdistGraph().frames > n", arg=frames)

    zoom(-150, 3)
    rects, _, _ = graph(page)
    under = [r for r in rects if r["x"] <= px <= r["x"] + r["w"] and r["y"] <= py <= r["y"] + r["h"]]
    assert len(under) == 1, "no node under the cursor after zooming in"
    assert under[0]["h"] > target["h"] * 1.5, (under[0], target)
    # The same point of the same node: a third of the way into it.
    assert abs((px - under[0]["x"]) / under[0]["w"] - 1 / 3) < 0.05, (under[0], px)
    page.mouse.move(canvas["x"] + px + 1, canvas["y"] + py)
    page.wait_for_function("(t) => document.querySelector('#nbdist-panel .nbdist-tooltip')"
                           ".innerText === t", arg=before)

    # However far out, the graph stays whole on the canvas.
    zoom(200, 25)
    rects, _, size = graph(page)
    assert len(rects) == 24, f"{len(rects)} of 24 nodes left on screen"
    for r in rects:
        assert 0 <= r["x"] and r["x"] + r["w"] <= size["w"] and 0 <= r["y"] <= size["h"], r
    page.locator(f"{PANEL} .nbdist-fit").click()
    page.wait_for_function("() => window.__nbdistGraph().records.some(r => r.kind === 'rect'"
                           f" && r.h >= {MIN_NODE_PX})")
    assert len(assert_nodes_readable(page, {"add", "tree_sum", "divide"})) == 24
    close_notebook(notebook, "02-tasks.ipynb")


def test_actors_notebook_each_actor_is_a_lane_of_calls(
        notebook: NotebookPage, lab: LabServer) -> None:
    page = notebook.page
    run_teaching_notebook(notebook, lab, "04-actors.ipynb")
    wait_all_done(page, 290)
    calls = page.evaluate(
        "() => [...document.querySelectorAll('#nbdist-panel [data-lane]')].map(e =>"
        " [e.dataset.lane, e.dataset.taskName, Number(e.dataset.col), Number(e.dataset.row)])")
    lanes: dict[str, list[tuple[int, int]]] = {}
    for lane, _, col, row in calls:
        lanes.setdefault(lane, []).append((col, row))
    assert len(lanes) == 4, lanes.keys()  # a, b, shared, ps
    others = set(cells(page, "[data-task-state]:not([data-lane])"))
    for lane, cs in lanes.items():
        rows = {r for _, r in cs}
        # A lane: the actor's calls side by side, wrapping every LANE_CALLS, on rows of its own.
        assert len(rows) == math.ceil(len(cs) / LANE_CALLS), (lane, cs)
        assert len({c for c, _ in cs}) == min(len(cs), LANE_CALLS), (lane, cs)
        assert not rows & {r for _, r in others}, lane
    ps = max(lanes.values(), key=len)
    assert len(ps) >= 240, len(ps)  # 3 workers x 40 steps x (get_params, apply_gradient)

    _, texts, _ = graph(page)
    heads = [t["text"] for t in texts if t["text"].startswith(("Counter", "ParameterServer"))]
    assert heads, "no lane head drawn"
    assert_nodes_readable(page, {"increment", "bump", "train_worker", "get_params",
                                 "apply_gradient", "__init__"})
    assert_layout_reads(page)
    screenshots(notebook, "04-actors")
    close_notebook(notebook, "04-actors.ipynb")


def test_objects_notebook_store_and_waits_read_at_the_default_split(
        notebook: NotebookPage, lab: LabServer) -> None:
    page = notebook.page
    run_teaching_notebook(notebook, lab, "03-objects.ipynb")
    wait_all_done(page, 14)
    page.wait_for_selector(f'{PANEL} tr[data-object-size]')
    page.wait_for_selector(f'{PANEL} [data-wait-done="true"]')
    assert_nodes_readable(page, {"chunk_sum", "slow_square", "put"})
    assert_layout_reads(page)
    screenshots(notebook, "03-objects")


def test_full_width_reads_too(notebook: NotebookPage) -> None:
    page = notebook.page
    # Single-document mode: the panel alone in the main area, the whole window wide.
    page.evaluate("() => { const app = window.jupyterapp; app.shell.mode = 'single-document';"
                  " app.shell.activateById('nbdist-panel'); }")
    page.wait_for_function("() => document.querySelector('#nbdist-panel')"
                           ".getBoundingClientRect().width > 1000")
    page.wait_for_function("() => window.__nbdistGraph().width > 500")
    assert_nodes_readable(page, {"chunk_sum", "slow_square", "put"})
    assert_layout_reads(page)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator(PANEL).screenshot(path=str(ARTIFACTS / "full-width-03-objects.png"))
    page.evaluate("() => { window.jupyterapp.shell.mode = 'multiple-document'; }")
    close_notebook(notebook, "03-objects.ipynb")

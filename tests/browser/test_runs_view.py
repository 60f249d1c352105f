"""A real ``nbdist.tune`` search in JupyterLab, followed by the panel's Runs view and by the
inline view in the cell that ran ``fit()``.

The search: four trials of a trainable that prints and reports a loss every iteration, under
ASHA, which stops the worse trials early. Checked in the page: the panel's Runs section lists
the four trials with their final status, draws a curve per trial and marks where the scheduler
stopped trials; its graph shows the search as four trial lanes with none of Tune's own calls
(polls, actor creation) unless "library calls" is ticked, and the Runs view was brought into
view when the search started; the cell shows the inline view (its bokeh curves drawn from the kernel's own
BokehJS, every outside request aborted) and the trials' printed lines grouped per trial.
At a wide panel the Runs row spans the grid's two columns under the other views. Screenshots:
test-artifacts/browser/runs-view-panel.png, runs-view-inline.png, runs-view-wide.png.
"""

from __future__ import annotations

import importlib.util
import json
import re

import pytest
from lab_session import LabServer, NotebookPage

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(importlib.util.find_spec("nbdist.tune") is None,
                       reason="needs nbdist.tune (a real Tuner(...).fit() drives the view)"),
]

PANEL = "#nbdist-panel"
RUNS = f"{PANEL} .nbdist-runs"

SEARCH = '''
import time
from nbdist import tune
from nbdist.tune.schedulers import ASHAScheduler

def trainable(config):
    for i in range(1, 13):
        loss = config["lr"] * 10 / i
        print(f"iteration {i} loss {loss:.3f}")
        tune.report({"loss": loss})
        time.sleep(0.05)  # deliberate sleep: a trial that takes a moment, as real ones do

results = tune.Tuner(
    trainable,
    param_space={"lr": tune.grid_search([0.1, 0.5, 1.0, 2.0])},
    tune_config=tune.TuneConfig(metric="loss", mode="min",
                                scheduler=ASHAScheduler(max_t=12, grace_period=2,
                                                        reduction_factor=2)),
).fit()
'''

# In-page: per bokeh root drawing run curves, the number of curves and of their points.
CURVES = """() => {
    const Bokeh = window.Bokeh;
    if (Bokeh === undefined || Bokeh.index === undefined) return [];
    const out = [];
    for (const view of Bokeh.index.roots) {
        const sources = (view.model.renderers || []).map(r => r.data_source)
            .filter(s => s && String(s.name || '').startsWith('run-curve:'));
        if (sources.length) out.push(sources.map(s => s.get_length()));
    }
    return out;
}"""


def test_a_tune_search_shows_its_trials_and_curves_in_the_panel_and_inline(
        lab: LabServer, notebook: NotebookPage) -> None:
    page = notebook.page
    outside: list[str] = []

    def block(route: object) -> None:
        outside.append(route.request.url)  # type: ignore[attr-defined]
        route.abort()  # type: ignore[attr-defined]
    page.context.route(re.compile(r"^(?!http://127\.0\.0\.1)(https?|wss?)://"), block)

    notebook.open_panel()
    page.wait_for_selector(f'{PANEL}[data-link-status="connected"]')
    notebook.run_cell("import nbdist\nnbdist.init(num_cpus=2)")
    notebook.run_cell(SEARCH, timeout=120)

    # The panel: four trials, all ended, one curve each, the scheduler's stops marked.
    page.wait_for_selector(f"{RUNS}:not([hidden])")
    rows = page.locator(f"{RUNS} tr.nbdist-run-row")
    page.wait_for_function(
        "(sel) => { const rows = document.querySelectorAll(sel); return rows.length === 4 &&"
        " [...rows].every(r => r.dataset.memberStatus === 'TERMINATED'); }",
        arg=f"{RUNS} tr.nbdist-run-row")
    assert rows.count() == 4
    curves = page.locator(f"{RUNS} polyline.nbdist-run-curve")
    assert curves.count() == 4
    points = [int(curves.nth(i).get_attribute("data-points") or 0) for i in range(4)]
    assert all(n >= 2 for n in points), points
    stops = page.locator(f'{RUNS} [data-mark-kind="stopped"]')
    assert stops.count() >= 1
    assert page.locator(f"{RUNS} .nbdist-run-metric").input_value() == "loss"
    # The search started: the Runs view was brought into view.
    assert page.locator(f"{PANEL}[data-revealed-runs]").count() == 1
    page.locator(RUNS).scroll_into_view_if_needed()
    notebook.screenshot("runs-view-panel")

    # The graph shows the search as its trials: one lane per trial, no Tune plumbing; the
    # "library calls" toggle shows the polls and actor creations, in the trials' lanes.
    nodes = f"{PANEL} .nbdist-graph-nodes li"
    page.wait_for_function(
        "(sel) => document.querySelectorAll(sel + '[data-library-role=\"work\"]').length === 4",
        arg=nodes)
    assert page.locator(f'{nodes}[data-library-role="control"]').count() == 0
    names = page.locator(nodes).evaluate_all("items => items.map(i => i.dataset.taskName)")
    assert not [n for n in names if n.startswith("TrialActor")], names
    lanes = set(page.locator(f'{nodes}[data-library-role="work"]').evaluate_all(
        "items => items.map(i => i.dataset.lane)"))
    assert len(lanes) == 4 and all(lane.startswith("member:tune:") for lane in lanes), lanes
    terminated = page.locator(f'{nodes}[data-library-role="work"]').evaluate_all(
        "items => items.map(i => i.textContent)")
    assert all("terminated" in t and "iter" in t for t in terminated), terminated
    notebook.screenshot("runs-view-trial-lanes")
    page.locator(f"{PANEL} .nbdist-show-internal").check()
    page.wait_for_function(
        "(sel) => document.querySelectorAll(sel + '[data-library-role=\"control\"]').length > 4",
        arg=nodes)
    polls = page.locator(f'{nodes}[data-library-role="control"][data-member]').evaluate_all(
        "items => items.filter(i => i.dataset.member).map(i => i.dataset.lane)")
    assert polls and set(polls) <= lanes
    page.locator(f"{PANEL} .nbdist-show-internal").uncheck()
    page.wait_for_function(
        "(sel) => document.querySelectorAll(sel + '[data-library-role=\"control\"]').length === 0",
        arg=nodes)

    # Inline: the run's view in the cell, its curves drawn by the kernel's own BokehJS.
    cell = page.locator(".jp-Cell").last
    cell.locator(".nbdist-run-view").wait_for(state="visible")
    page.wait_for_function(
        f"() => ({CURVES})().some(c => c.length === 4 && c.every(n => n >= 2))")
    assert "TERMINATED" in cell.locator(".nbdist-run-view").inner_text()
    # The trials' lines: one collapsible section per trial, not in the cell's text stream.
    cell.get_by_text(re.compile(r"Trial \w+_00000: \d+ lines")).wait_for()
    titles = cell.get_by_text(re.compile(r"Trial \w+_0000\d: \d+ lines"))
    assert titles.count() == 4
    outputs = json.loads(notebook.evaluate(
        "const cells = nb.content.model.toJSON().cells;"
        "return JSON.stringify(cells[cells.length - 1].outputs);"))
    streams = "".join(o.get("text", "") for o in outputs if o["output_type"] == "stream")
    assert "iteration 1 loss" not in streams
    cell.locator(".nbdist-run-view").scroll_into_view_if_needed()
    notebook.screenshot("runs-view-inline")
    assert outside == [], outside

    # A wide panel: the two-by-two grid, with the Runs row across both columns under it.
    page.set_viewport_size({"width": 2600, "height": 1300})
    page.wait_for_function(
        "(sel) => { const p = document.querySelector(sel); return p &&"
        " getComputedStyle(p.querySelector('.nbdist-grid')).display === 'grid'; }", arg=PANEL)
    grid = page.locator(f"{PANEL} .nbdist-grid").bounding_box()
    runs = page.locator(RUNS).bounding_box()
    workers = page.locator(f"{PANEL} .nbdist-workers").bounding_box()
    assert grid and runs and workers
    assert runs["width"] > 0.95 * grid["width"] and runs["y"] >= workers["y"] + workers["height"]
    notebook.screenshot("runs-view-wide")
    page.set_viewport_size({"width": 1600, "height": 1000})

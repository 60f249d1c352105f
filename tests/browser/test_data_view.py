"""A dataset's execution in JupyterLab: its operators as lanes, in the panel's Runs view and
inline in the cell that consumed it.

The pipeline: a read of 12 blocks mapped by a function that takes a quarter of a second per
block, then a sort. It runs well over a second, so it becomes a run of the views (shorter
executions show only their progress line). Checked in the page: the panel's Runs section
draws the run as two lanes (the fused read and map, then the sort), each with its blocks,
rows and status, no curves and no metric menu; the cell shows the same lanes in its inline
view, and the graph shows the block tasks in the operators' lanes. Screenshots:
test-artifacts/browser/data-lanes-panel.png and data-lanes-inline.png.
"""

from __future__ import annotations

import pytest
from lab_session import LabServer, NotebookPage

pytestmark = pytest.mark.timeout(240)

PANEL = "#nbdist-panel"
RUNS = f"{PANEL} .nbdist-runs"
LANES = f"{RUNS} .nbdist-data-lane"

PIPELINE = '''
import time
from nbdist import data

def slow(batch):
    time.sleep(0.25)  # deliberate sleep: a block's work, so the run lasts over a second
    return {"id": batch["id"] * 2}

ds = data.range(1200, override_num_blocks=12).map_batches(slow).sort("id")
print("rows:", ds.count())
'''


def test_a_dataset_execution_shows_one_lane_per_operator_in_the_panel_and_inline(
        lab: LabServer, notebook: NotebookPage) -> None:
    page = notebook.page
    notebook.open_panel()
    page.wait_for_selector(f'{PANEL}[data-link-status="connected"]')
    notebook.run_cell("import nbdist\nnbdist.init(num_cpus=2)")
    notebook.run_cell(PIPELINE, timeout=120)

    # The panel: one run of two lanes, both ended, the map's with all 12 blocks.
    page.wait_for_selector(f"{RUNS}:not([hidden])")
    page.wait_for_function(
        "(sel) => { const lanes = document.querySelectorAll(sel); return lanes.length === 2 &&"
        " [...lanes].every(l => l.dataset.memberStatus === 'TERMINATED'); }", arg=LANES)
    lanes = page.locator(LANES).evaluate_all(
        "items => items.map(i => ({lane: i.dataset.lane, blocks: i.dataset.blocks,"
        " flying: i.dataset.inFlight, text: i.textContent}))")
    assert [lane["lane"] for lane in lanes] == ["ReadRange->MapBatches(slow)", "Sort"]
    assert lanes[0]["blocks"] == "12" and all(lane["flying"] == "0" for lane in lanes)
    assert all("1,200 rows" in lane["text"] for lane in lanes), lanes
    run = page.locator(f"{RUNS} .nbdist-run").filter(has=page.locator(".nbdist-data-lanes"))
    assert "2 operators (2 terminated)" in run.locator(".nbdist-run-title").inner_text()
    assert run.locator(".nbdist-run-metric").is_hidden()
    assert run.locator(".nbdist-run-chart").is_hidden()
    page.locator(RUNS).scroll_into_view_if_needed()
    notebook.screenshot("data-lanes-panel")

    # The graph: the block tasks are drawn in their operator's lane, not as loose tasks.
    nodes = f"{PANEL} .nbdist-graph-nodes li"
    page.wait_for_function(
        "(sel) => document.querySelectorAll(sel + '[data-library=\"data\"]').length > 0",
        arg=nodes)
    lanes_drawn = set(page.locator(f'{nodes}[data-library="data"]').evaluate_all(
        "items => items.map(i => i.dataset.lane)"))
    assert lanes_drawn and all(lane.startswith("member:data:") for lane in lanes_drawn)

    # Inline: the cell that ran the pipeline shows the same lanes and its result.
    cell = page.locator(".jp-Cell").last
    view = cell.locator(".nbdist-run-view")
    view.wait_for(state="visible")
    page.wait_for_function(
        "(cell) => { const rows = cell.querySelectorAll('.nbdist-data-lanes tr');"
        " return rows.length === 2 && [...rows].every(r => r.textContent.includes('TERMINATED')); }",
        arg=cell.element_handle())
    inline = view.locator(".nbdist-data-lanes tr[data-lane]").evaluate_all(
        "rows => rows.map(r => [r.dataset.lane, r.dataset.blocks])")
    assert inline[0] == ["ReadRange->MapBatches(slow)", "12"] and inline[1][0] == "Sort"
    assert "rows: 1200" in cell.inner_text()
    cell.scroll_into_view_if_needed()
    notebook.screenshot("data-lanes-inline")

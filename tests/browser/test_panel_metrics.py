"""The panel's Metrics view, in a real JupyterLab and Chromium on a real kernel: tasks record
a Counter and a Gauge (and a Histogram), a placement group is reserved, and the panel shows
each metric's kind, tags and current value, updated as tasks record new values.

The tests share one notebook and kernel (see conftest.py) and run in file order.
"""

from __future__ import annotations

import pytest
from lab_session import NotebookPage

pytestmark = pytest.mark.timeout(240)

PANEL = "#nbdist-panel"
VIEW = f"{PANEL} .nbdist-metrics"

RECORD = """from nbdist.util import metrics
from nbdist.util.placement_group import placement_group

@nbdist.remote
def serve(route):
    metrics.Counter("requests", "requests served", tag_keys=("route",)).inc(
        tags={"route": route})
    metrics.Histogram("latency_s", "time to serve", boundaries=[0.1, 1.0]).observe(0.5)

@nbdist.remote
def measure(depth):
    metrics.Gauge("queue_depth", "items waiting").set(depth)

nbdist.get([serve.remote("/a") for _ in range(3)] + [serve.remote("/b")])
nbdist.get(measure.remote(7))
pg = placement_group([{"CPU": 1}], strategy="SPREAD", name="trainers")
nbdist.get(pg.ready(), timeout=30)"""


def value(notebook: NotebookPage, name: str, tags: str = "–") -> str:
    row = notebook.page.locator(f'{VIEW} tr[data-metric="{name}"][data-tags="{tags}"]')
    return str(row.locator(".nbdist-metric-value").inner_text())


def wait_value(notebook: NotebookPage, name: str, tags: str, text: str) -> None:
    notebook.page.wait_for_function(
        """([name, tags, text]) => {
            const row = document.querySelector(
                `#nbdist-panel .nbdist-metrics tr[data-metric="${name}"][data-tags="${tags}"]`);
            return row !== null &&
                row.querySelector('.nbdist-metric-value').firstChild.textContent === text;
        }""", arg=[name, tags, text])


def test_the_view_is_hidden_until_a_metric_is_recorded(notebook: NotebookPage) -> None:
    page = notebook.page
    notebook.open_panel()
    page.wait_for_selector(f'{PANEL}[data-link-status="connected"]')
    notebook.run_cell("import nbdist, time\nnbdist.init(num_cpus=2)")
    page.wait_for_selector(f'{PANEL}[data-cluster="true"]')
    assert page.locator(VIEW).count() == 1 and page.locator(VIEW).is_hidden()


def test_counters_gauges_histograms_and_placement_groups_show(notebook: NotebookPage) -> None:
    page = notebook.page
    notebook.run_cell(RECORD)
    wait_value(notebook, "requests", "route=/a", "3")
    wait_value(notebook, "queue_depth", "–", "7")
    wait_value(notebook, "latency_s", "–", "4 values, mean 0.5")
    assert page.locator(VIEW).is_visible()
    assert value(notebook, "requests", "route=/b") == "1"
    kinds = page.eval_on_selector_all(
        f"{VIEW} tr.nbdist-metric", "rows => rows.map(r => [r.dataset.metric, r.dataset.kind])")
    assert sorted(map(tuple, kinds)) == [("latency_s", "histogram"), ("queue_depth", "gauge"),
                                         ("requests", "counter"), ("requests", "counter")]
    assert "≤1: 4" in value(notebook, "latency_s")  # its buckets, under the count and mean
    group = page.locator(f'{VIEW} tr.nbdist-placement-group[data-state="CREATED"]')
    group.wait_for()
    assert group.locator("td").all_inner_texts() == ["trainers", "SPREAD", "CREATED",
                                                     "{CPU: 1}"]


def test_values_follow_what_tasks_record(notebook: NotebookPage) -> None:
    notebook.run_cell('nbdist.get([serve.remote("/a") for _ in range(4)])\n'
                      "nbdist.get(measure.remote(2))")
    wait_value(notebook, "requests", "route=/a", "7")
    wait_value(notebook, "queue_depth", "–", "2")
    assert value(notebook, "requests", "route=/b") == "1"
    notebook.run_cell("nbdist.shutdown()")
    notebook.page.wait_for_selector(f'{PANEL}[data-cluster="false"]')

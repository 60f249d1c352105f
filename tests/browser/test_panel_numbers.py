"""The numbers the nbdist panel shows, in a real JupyterLab and Chromium on a real kernel.

The tests share one notebook, kernel and cluster (the ``notebook`` fixture below opens the
panel and starts the cluster, so each test also runs alone): cells under markdown cells are
named by their execution count, a grouped run's wait fills up as its tasks finish, its header's
states add up to its task count while its workers show busy, and a stopped cluster leaves no
actor alive. Every assertion reads what the panel rendered. Waits on the page have limits far
above what they take on a quiet machine: the suite runs beside other work on 2 cores.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lab_session import LabServer, NotebookPage, write_notebook

pytestmark = pytest.mark.timeout(420)

PANEL = "#nbdist-panel"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"
SETTLE_MS = 180_000  # the panel catching up with a 3,000-task run on a loaded machine


@pytest.fixture(scope="module")
def notebook(lab: LabServer, chromium: Any) -> Iterator[NotebookPage]:
    write_notebook(lab.root / "numbers.ipynb", ["1 + 1"])
    page = chromium.pages[0] if chromium.pages else chromium.new_page()
    page.set_default_timeout(60_000)
    nb = NotebookPage(page, ARTIFACTS, "numbers.ipynb")
    nb.open(lab.notebook_url("numbers.ipynb"))
    nb.open_panel()
    page.wait_for_selector(f'{PANEL}[data-link-status="connected"]')
    nb.run_cell("import nbdist, time\nnbdist.init(num_cpus=2)", timeout=120)
    page.wait_for_selector(f'{PANEL}[data-cluster="true"]')
    yield nb


def observe(notebook: NotebookPage, name: str, selector: str, read: str) -> None:
    """Record in ``window[name]`` every value ``read`` (JS of ``el``) of the elements matching
    ``selector`` inside the panel, at each change of the panel's DOM."""
    notebook.page.evaluate(
        f"""() => {{
            window.{name} = [];
            const record = () => {{
                for (const el of document.querySelectorAll('#nbdist-panel {selector}')) {{
                    window.{name}.push({read});
                }}
            }};
            window.{name}Observer = new MutationObserver(record);
            window.{name}Observer.observe(document.querySelector('#nbdist-panel'),
                {{subtree: true, attributes: true, childList: true, characterData: true}});
        }}""")


def recorded(notebook: NotebookPage, name: str) -> list:
    return list(notebook.page.evaluate(
        f"() => {{ window.{name}Observer.disconnect(); return window.{name}; }}"))


def test_a_cell_is_named_by_its_execution_count_and_go_to_cell_finds_it(
        notebook: NotebookPage) -> None:
    page = notebook.page
    notebook.evaluate("""const model = nb.content.model;
        model.sharedModel.insertCell(0, {cell_type: 'markdown', source: '# Notes'});
        model.sharedModel.insertCell(1, {cell_type: 'markdown', source: 'More notes'});""")
    notebook.run_cell("@nbdist.remote\ndef nap(s):\n    time.sleep(s)\n    return s")
    notebook.run_cell("_ = nbdist.get([nap.remote(0.5) for _ in range(2)])")
    index, count = notebook.evaluate(
        "const cells = nb.content.model.cells;"
        " return [cells.length - 1, cells.get(cells.length - 1).executionCount];")
    assert isinstance(count, int) and count != index + 1  # markdown cells come before it
    label = page.locator(f'{PANEL} [data-wait-total="2"][data-wait-done="true"] .nbdist-label')
    label.wait_for()
    assert label.inner_text() == f"get() in cell [{count}]"

    notebook.evaluate("nb.content.activeCellIndex = 0;")
    page.locator(f'{PANEL} [data-task-name="nap"]').first.dispatch_event("click")
    details = page.locator(f"{PANEL} .nbdist-details")
    details.locator("dd", has_text=f"in cell [{count}]").wait_for()
    details.locator(".nbdist-jump").click()
    assert notebook.evaluate("return nb.content.activeCellIndex;") == index


def test_a_grouped_get_fills_up_as_its_tasks_finish_and_workers_show_busy(
        notebook: NotebookPage) -> None:
    page = notebook.page
    observe(notebook, "__ready", '[data-wait-total="3000"][data-wait-done="false"]',
            "Number(el.dataset.waitReady)")
    observe(notebook, "__caption", ".nbdist-workers .nbdist-note", "el.textContent")
    notebook.run_cell("@nbdist.remote\ndef tick(i):\n    time.sleep(0.002)\n    return i\n\n"
                      "_ = nbdist.get([tick.remote(i) for i in range(3000)])", timeout=300)
    page.wait_for_selector(f'{PANEL}[data-grouped="true"]', timeout=SETTLE_MS)
    # The get's wait begins while the kernel's hub narrows its subscription to what a grouped
    # model follows: on a loaded machine its first record was lost in that swap, and the wait
    # never showed at all (the hub now takes the records pending at the swap).
    page.wait_for_selector(
        f'{PANEL} [data-wait-total="3000"][data-wait-ready="3000"][data-wait-done="true"]',
        timeout=SETTLE_MS)
    ready = recorded(notebook, "__ready")
    captions = recorded(notebook, "__caption")
    assert ready and ready[0] < 3000, f"the wait was full from its start: {ready[:5]}"
    assert any(0 < n < 3000 for n in ready), f"no partial progress rendered: {ready[:20]}"
    assert ready == sorted(ready), "progress went backwards"
    busy = [int(m.group(1)) for c in captions if (m := re.search(r"(\d+) busy now", c))]
    assert max(busy, default=0) > 0, f"no worker shown busy during the run: {set(captions)}"

    totals = page.locator(f"{PANEL} .nbdist-totals").inner_text()
    parts = dict((state, int(n)) for n, state in re.findall(
        r"(\d+) (pending|scheduled|running|finished|failed)", totals))
    assert set(parts) == {"pending", "scheduled", "running", "finished", "failed"}, totals
    assert sum(parts.values()) == int(totals.split(" tasks")[0]), totals


def test_a_stopped_cluster_leaves_no_actor_alive(notebook: NotebookPage) -> None:
    page = notebook.page
    caption = page.locator(f"{PANEL} .nbdist-workers .nbdist-note")
    notebook.run_cell("@nbdist.remote\nclass Counter:\n    def inc(self):\n        return 1\n\n"
                      "counter = Counter.remote()\nassert nbdist.get(counter.inc.remote()) == 1")
    page.wait_for_function(
        "() => /1 actors alive/.test(document.querySelector("
        "'#nbdist-panel .nbdist-workers .nbdist-note').textContent)")
    notebook.run_cell("nbdist.shutdown()")
    page.wait_for_selector(f'{PANEL}[data-cluster="false"]')
    page.wait_for_function(
        "() => /0 busy now · 0 actors alive, 1 dead/.test(document.querySelector("
        "'#nbdist-panel .nbdist-workers .nbdist-note').textContent)", timeout=15_000)
    assert "0 actors alive" in caption.inner_text()

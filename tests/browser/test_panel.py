"""The nbdist panel in a real JupyterLab, in Debian's headless Chromium, on a real kernel.

The tests share one notebook and kernel (see conftest.py) and run in file order: the panel is
opened before any cluster exists, then cells of the notebook start one, submit a DAG, wait on
tasks, put an object; a second notebook is opened and switched to and from (the second time
with the kernel claiming another schema version); the first teaching notebook is run from top
to bottom with the panel following it; and finally the kernel is restarted. Every assertion reads the panel's
DOM hooks (`#nbdist-panel`, `data-task-*`, `data-wait-*`, `data-object-size`), i.e. what the
panel rendered from the comm's messages. Screenshots go to test-artifacts/browser/.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from lab_session import LabServer, NotebookPage, write_notebook

pytestmark = pytest.mark.timeout(180)

PANEL = "#nbdist-panel"
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def count(page: Any, selector: str) -> int:
    return int(page.locator(selector).count())


def wait_counts(page: Any, expected: dict[str, int], timeout: float = 30) -> None:
    """Wait until each selector (inside the panel) matches exactly its number of elements."""
    page.wait_for_function(
        """(expected) => Object.entries(expected).every(([sel, n]) =>
               document.querySelectorAll('#nbdist-panel ' + sel).length === n)""",
        arg=expected, timeout=timeout * 1000)


def task_selector(name: str, state: str | None = None) -> str:
    sel = f'[data-task-name="{name}"]'
    return sel + (f'[data-task-state="{state}"]' if state else "")


def test_the_panel_opens_from_the_palette_and_says_there_is_no_cluster_yet(
        notebook: NotebookPage) -> None:
    page = notebook.page
    notebook.run_cell("import nbdist, time")
    panel = notebook.open_panel()
    page.wait_for_selector(f'{PANEL}[data-link-status="connected"][data-cluster="false"]')
    assert "No cluster yet" in panel.locator(".nbdist-message").inner_text()
    assert count(page, f"{PANEL} [data-task-state]") == 0
    notebook.screenshot("1-no-cluster-yet")


def test_the_graph_shows_the_dag_tasks_in_their_states(notebook: NotebookPage) -> None:
    page = notebook.page
    notebook.run_cell("nbdist.init(num_cpus=2)")
    page.wait_for_selector(f'{PANEL}[data-cluster="true"]')
    notebook.run_cell(
        "@nbdist.remote\ndef load(i):\n    time.sleep(0.05)\n    return i\n\n"
        "@nbdist.remote\ndef square(x):\n    return x * x\n\n"
        "@nbdist.remote\ndef total(*xs):\n    return sum(xs)\n\n"
        "@nbdist.remote\ndef boom(x):\n    raise ValueError(f'bad input {x}')\n\n"
        "parts = [load.remote(i) for i in range(6)]\n"
        "squares = [square.remote(p) for p in parts]\n"
        "assert nbdist.get(total.remote(*squares)) == 55\n"
        "bad = boom.remote(parts[1])\n"
        "_ = nbdist.wait([bad])")
    wait_counts(page, {task_selector("load", "finished"): 6,
                       task_selector("square", "finished"): 6,
                       task_selector("total", "finished"): 1,
                       task_selector("boom", "failed"): 1,
                       "[data-task-state]": 14})
    notebook.screenshot("2-dag-finished")

    # The real mouse on the canvas: the graph fits itself with a 12 px margin, so the first
    # task submitted (load, column 0, row 0) is under the canvas's top-left corner plus 14 px.
    box = page.locator(f"{PANEL} .nbdist-graph-canvas").bounding_box()
    page.mouse.move(box["x"] + 14, box["y"] + 14)
    tooltip = page.locator(f"{PANEL} .nbdist-tooltip")
    tooltip.wait_for(state="visible")
    assert tooltip.inner_text().startswith("load: finished"), tooltip.inner_text()
    page.mouse.click(box["x"] + 14, box["y"] + 14)
    page.locator(f"{PANEL} .nbdist-details dd", has_text="load").first.wait_for()

    # While tasks run: two CPUs, three sleeping tasks -> two running and one scheduled (ready,
    # waiting for a CPU); a task taking a nap's result is pending (waiting for its argument).
    notebook.run_cell("@nbdist.remote\ndef nap():\n    time.sleep(3)\n\n"
                      "@nbdist.remote\ndef after(x):\n    return x\n\n"
                      "naps = [nap.remote() for _ in range(3)]\nlater = after.remote(naps[0])")
    wait_counts(page, {task_selector("nap", "running"): 2, task_selector("nap", "scheduled"): 1,
                       task_selector("after", "pending"): 1})
    notebook.screenshot("3-tasks-running")
    notebook.run_cell("_ = nbdist.get(naps + [later])")
    wait_counts(page, {task_selector("nap", "finished"): 3,
                       task_selector("after", "finished"): 1})

    # Selecting the failed task (from the graph's list) shows its error and leads to its cell.
    page.locator(f"{PANEL} {task_selector('boom')}").dispatch_event("click")
    details = page.locator(f"{PANEL} .nbdist-details")
    details.locator(".nbdist-error", has_text="ValueError: bad input 1").wait_for()
    assert "boom" in details.inner_text()
    details.locator(".nbdist-jump").click()
    active_source = notebook.evaluate(
        "return nb.content.activeCell.model.sharedModel.getSource();")
    assert "def boom(x)" in active_source


def test_a_wait_fills_up_while_its_tasks_finish(notebook: NotebookPage) -> None:
    page = notebook.page
    # Record every ready count the panel renders for the wait on 6 refs.
    page.evaluate("""() => {
        window.__waitSeen = [];
        const record = () => {
            for (const row of document.querySelectorAll(
                    '#nbdist-panel [data-wait-total="6"][data-wait-done="false"]')) {
                window.__waitSeen.push(Number(row.dataset.waitReady));
            }
        };
        window.__waitObserver = new MutationObserver(record);
        window.__waitObserver.observe(document.querySelector('#nbdist-panel'),
            {subtree: true, attributes: true, attributeFilter: ['data-wait-ready'],
             childList: true});
    }""")
    notebook.run_cell(
        "@nbdist.remote\ndef step(i):\n    time.sleep(0.4 * (i + 1))\n    return i\n\n"
        "ready, rest = nbdist.wait([step.remote(i) for i in range(6)], num_returns=6,"
        " timeout=60)\nassert len(ready) == 6", wait=False)
    page.wait_for_selector(f'{PANEL} [data-wait-total="6"][data-wait-done="false"]')
    notebook.screenshot("4-wait-in-progress")
    notebook.wait_run()
    page.wait_for_selector(
        f'{PANEL} [data-wait-total="6"][data-wait-ready="6"][data-wait-done="true"]')
    seen = page.evaluate("() => { window.__waitObserver.disconnect(); return window.__waitSeen; }")
    assert any(0 < ready < 6 for ready in seen), f"no partial progress rendered: {seen}"
    assert seen == sorted(seen), f"progress went backwards: {seen}"
    notebook.screenshot("5-wait-done")


def test_the_store_lists_an_object_put_from_the_notebook(notebook: NotebookPage) -> None:
    page = notebook.page
    notebook.run_cell("import numpy as np\nbig = nbdist.put(np.zeros(1_000_000))\n"
                      "print('PUT', big.hex())")
    text = page.locator(".jp-OutputArea-output", has_text="PUT ").last.inner_text()
    match = re.search(r"PUT ([0-9a-f]+)", text)
    assert match, text
    row = page.locator(f'{PANEL} tr[data-object-id="{match.group(1)}"]')
    row.wait_for()
    assert int(row.get_attribute("data-object-size") or 0) >= 8_000_000
    assert "put" in row.inner_text() and "shared memory" in row.inner_text()
    # The kernel holds one ref; no task is using it; it is in memory.
    page.wait_for_function(
        "(sel) => document.querySelector(sel)?.dataset.objectRefs === '1'",
        arg=f'{PANEL} tr[data-object-id="{match.group(1)}"]', timeout=10_000)
    assert row.get_attribute("data-object-pinned") == "false"
    assert row.get_attribute("data-object-spilled") == "false"
    assert "in memory" in row.inner_text()
    notebook.screenshot("6-object-store")
    notebook.run_cell("del big")
    row.wait_for(state="detached")


def test_the_panel_follows_the_notebook_the_user_switches_to(
        notebook: NotebookPage, lab: LabServer) -> None:
    page = notebook.page
    write_notebook(lab.root / "other.ipynb", ["1 + 1"])
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:open',"
                  " {path: 'other.ipynb'})")
    notebook.wait_kernel_idle("other.ipynb")
    status = page.locator(f"{PANEL} .nbdist-status")
    # The other kernel never ran nbdist: the panel loads it there and finds no cluster.
    page.wait_for_selector(f'{PANEL}[data-link-status="connected"][data-cluster="false"]')
    assert "other.ipynb" in status.inner_text()
    assert count(page, f"{PANEL} [data-task-state]") == 0
    notebook.screenshot("7-other-notebook")
    notebook.evaluate("window.jupyterapp.shell.activateById(nb.id);")
    page.wait_for_selector(f'{PANEL}[data-link-status="connected"][data-cluster="true"]')
    assert "panel.ipynb" in status.inner_text()
    page.wait_for_selector(f'{PANEL} {task_selector("total", "finished")}')


def test_a_kernel_speaking_another_schema_gets_a_clear_message(notebook: NotebookPage) -> None:
    page = notebook.page
    # This kernel's bridge now claims the next schema version; the panel meets it on its next
    # connection, which switching notebooks away and back makes.
    notebook.run_cell("import nbdist.jupyter.bridge as bridge\nbridge.SCHEMA_VERSION += 1")
    notebook.evaluate("window.jupyterapp.shell.activateById(nb.id);", "other.ipynb")
    page.wait_for_selector(f'{PANEL}[data-link-status="connected"][data-cluster="false"]')
    notebook.evaluate("window.jupyterapp.shell.activateById(nb.id);")
    page.wait_for_selector(f'{PANEL}[data-link-status="failed"]')
    message = page.locator(f"{PANEL} .nbdist-message").inner_text()
    assert "versions differ" in message, message
    notebook.screenshot("8-versions-differ")
    notebook.evaluate("await nb.sessionContext.shutdown(); nb.dispose();", "other.ipynb")


def test_the_first_teaching_notebook_run_top_to_bottom_with_the_panel_open(
        notebook: NotebookPage, lab: LabServer) -> None:
    page = notebook.page
    shutil.copy(NOTEBOOKS / "00-quickstart.ipynb", lab.root / "quickstart.ipynb")
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:open',"
                  " {path: 'quickstart.ipynb'})")
    notebook.wait_kernel_idle("quickstart.ipynb")
    page.wait_for_selector(f'{PANEL}[data-link-status="connected"][data-cluster="false"]')
    assert "quickstart.ipynb" in page.locator(f"{PANEL} .nbdist-status").inner_text()
    # The notebook ends with ray.shutdown(): record the object sizes the panel lists meanwhile.
    page.evaluate("""() => {
        window.__objectSizes = new Set();
        window.__objectObserver = new MutationObserver(() => {
            for (const row of document.querySelectorAll('#nbdist-panel [data-object-size]')) {
                window.__objectSizes.add(Number(row.dataset.objectSize));
            }
        });
        window.__objectObserver.observe(document.querySelector('#nbdist-panel'),
            {subtree: true, childList: true, attributes: true});
    }""")
    ok = notebook.evaluate("return await window.jupyterapp.commands.execute("
                           "'notebook:run-all-cells');", "quickstart.ipynb")
    assert ok is True, "the teaching notebook failed"
    wait_counts(page, {task_selector("add", "finished"): 2,
                       task_selector("Counter.inc", "finished"): 5})
    page.wait_for_selector(f'{PANEL}[data-cluster="false"]')  # its last cell shuts down
    assert "shut down" in page.locator(f"{PANEL} .nbdist-message").inner_text()
    sizes = page.evaluate("() => { window.__objectObserver.disconnect();"
                          " return [...window.__objectSizes]; }")
    assert any(size >= 8_000_000 for size in sizes), sizes  # the 1000x1000 float64 put
    # Its get() of the add chain (1 ref) and of the five Counter.inc calls.
    for total in (1, 5):
        done = f'{PANEL} [data-wait-total="{total}"][data-wait-ready="{total}"][data-wait-done="true"]'
        assert count(page, done) >= 1, total
    notebook.screenshot("9-teaching-notebook")
    notebook.evaluate("await nb.sessionContext.shutdown(); nb.dispose();", "quickstart.ipynb")


def test_the_panel_reconnects_after_a_kernel_restart(notebook: NotebookPage) -> None:
    page = notebook.page
    # Back on panel.ipynb, whose kernel still claims another schema (the test above).
    notebook.evaluate("window.jupyterapp.shell.activateById(nb.id);")
    page.wait_for_function("() => document.querySelector('#nbdist-panel .nbdist-status')"
                           ".textContent.includes('panel.ipynb')")
    page.wait_for_selector(f'{PANEL}[data-link-status="failed"]')
    notebook.evaluate("await nb.sessionContext.session.kernel.restart();")
    page.wait_for_selector(f'{PANEL}[data-link-status="connected"][data-cluster="false"]',
                           timeout=60_000)
    assert count(page, f"{PANEL} [data-task-state]") == 0
    notebook.run_cell("import nbdist\nnbdist.init(num_cpus=2)\n\n"
                      "@nbdist.remote\ndef again():\n    return 1\n\n"
                      "assert nbdist.get(again.remote()) == 1")
    wait_counts(page, {task_selector("again", "finished"): 1, "[data-task-state]": 1})
    notebook.screenshot("10-after-restart")

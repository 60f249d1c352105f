"""Step-through mode from the panel, in a real JupyterLab in headless Chromium on a real kernel.

The panel's toggle turns the mode on; a cell submits a tree of adds and blocks in ``get`` on
its root, so the kernel's shell is busy for the rest of the test. The graph shows the leaves
held (``data-held``, drawn with a dashed outline); Level, Step and Run, clicked in the panel,
reach the kernel on its control channel while the cell is still blocked, release the tasks
level by level, and the cell finishes once Run has released the last one. Every assertion
reads the panel's DOM hooks; screenshots go to test-artifacts/browser/.
"""

from __future__ import annotations

import pytest
from lab_session import NotebookPage

pytestmark = pytest.mark.timeout(180)

PANEL = "#nbdist-panel"
BAR = f"{PANEL} .nbdist-step-bar"


def wait_counts(notebook: NotebookPage, expected: dict[str, int], timeout: float = 30) -> None:
    """Wait until each selector (inside the panel) matches exactly its number of elements."""
    notebook.page.wait_for_function(
        """(expected) => Object.entries(expected).every(([sel, n]) =>
               document.querySelectorAll('#nbdist-panel ' + sel).length === n)""",
        arg=expected, timeout=timeout * 1000)


def add(state: str | None = None, held: bool | None = None) -> str:
    sel = '[data-task-name="add"]'
    if state:
        sel += f'[data-task-state="{state}"]'
    if held is not None:
        sel += f'[data-held="{str(held).lower()}"]'
    return sel


def cell_running(notebook: NotebookPage) -> bool:
    """Whether the cell started last has not finished. (Not the kernel's status: the idle
    status ipykernel sends after each control message reaches JupyterLab as well.)"""
    return bool(notebook.page.evaluate(
        """async () => {
            const pending = {};
            const first = await Promise.race([window.__nbdistRun, Promise.resolve(pending)]);
            return first === pending;
        }"""))


def test_stepping_a_tree_from_the_panel_while_a_cell_is_blocked_in_get(
        notebook: NotebookPage) -> None:
    page = notebook.page
    notebook.run_cell("import nbdist\nnbdist.init(num_cpus=2)\n\n"
                      "@nbdist.remote\ndef add(a, b):\n    return a + b")
    notebook.open_panel()
    page.wait_for_selector(f'{PANEL}[data-link-status="connected"][data-cluster="true"]')
    page.wait_for_selector(f'{BAR}[data-on="false"]')
    assert page.locator(f"{PANEL} .nbdist-legend-held").inner_text() == "held"

    page.locator(f"{PANEL} .nbdist-step-toggle").click()
    page.wait_for_selector(f'{BAR}[data-on="true"]')
    notebook.run_cell("leaves = [add.remote(i, i) for i in range(4)]\n"
                      "pairs = [add.remote(leaves[0], leaves[1]),"
                      " add.remote(leaves[2], leaves[3])]\n"
                      "print('root', nbdist.get(add.remote(*pairs)))", wait=False)
    # The leaves are the ready set: held; the sums wait for their arguments.
    wait_counts(notebook, {add(held=True): 4, add(): 7, add("finished"): 0})
    page.wait_for_selector(f'{BAR}[data-held="4"]')
    notebook.screenshot("step-1-leaves-held")
    assert cell_running(notebook), "the cell should be blocked in get on the held tasks"

    page.locator(f"{PANEL} .nbdist-step-level").click()
    wait_counts(notebook, {add("finished"): 4, add(held=True): 2})
    page.wait_for_selector(f'{BAR}[data-held="2"]')
    notebook.screenshot("step-2-next-level-held")

    page.locator(f"{PANEL} .nbdist-step-step").click()
    wait_counts(notebook, {add("finished"): 5, add(held=True): 1})
    assert cell_running(notebook)

    page.locator(f"{PANEL} .nbdist-step-run").click()
    wait_counts(notebook, {add("finished"): 7, add(held=True): 0})
    page.wait_for_selector(f'{BAR}[data-on="false"]')
    notebook.wait_run()
    out = page.locator(".jp-OutputArea-output", has_text="root ")
    assert out.last.inner_text().strip() == "root 12"
    notebook.screenshot("step-3-after-run")


def test_the_mode_off_leaves_tasks_running_at_once(notebook: NotebookPage) -> None:
    page = notebook.page
    page.wait_for_selector(f'{BAR}[data-on="false"]')
    assert page.locator(f"{PANEL} .nbdist-step-step").is_disabled()
    notebook.run_cell("assert nbdist.get([add.remote(i, 1) for i in range(3)]) == [1, 2, 3]")
    wait_counts(notebook, {add("finished"): 10, add(held=True): 0})

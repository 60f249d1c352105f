"""Step-through mode from the panel, in a real JupyterLab in headless Chromium on a real kernel.

The panel's toggle turns the mode on; a cell submits a tree of adds and blocks in ``get`` on
its root, so the kernel's shell is busy for the rest of the test. The graph shows the leaves
held (``data-held``, drawn with a dashed outline); Level, Step and Run, clicked in the panel,
reach the kernel on its control channel while the cell is still blocked, release the tasks
level by level, and the cell finishes once Run has released the last one. Every assertion
reads the panel's DOM hooks; screenshots go to test-artifacts/browser/.

The same blocked cell shape shows what the control channel also carries for debugging: a wait
row blocked for long says why it waits (``nbdist.util.why``), the details of a selected
running task show its current Python stack, asked again while it stays selected, and a task
paused at ``breakpoint()`` shows as paused in the graph and the details.
"""

from __future__ import annotations

from typing import Any

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


GATE_CELL = """
import os, time
nbdist.init(num_cpus=2, ignore_reinit_error=True)

@nbdist.remote(num_cpus=2)
def at_gate(path):
    def hold_here():
        while not os.path.exists(path):
            time.sleep(0.05)  # the task's work: waiting for the test to open the gate
        return "open"
    return hold_here()

@nbdist.remote(num_cpus=2)
def starved():
    return "fed"

gated = at_gate.remote(GATE)
print("result", nbdist.get(starved.remote()))
"""

PAUSE_CELL = """
@nbdist.remote
def pauses(x):
    y = x * 2
    breakpoint()
    return y

paused_ref = pauses.remote(21)
"""


def select(notebook: NotebookPage, name: str) -> None:
    """Select a task the way a keyboard user does: its item in the graph's task list."""
    item = notebook.page.locator(f'{PANEL} li[data-task-name="{name}"]').first
    item.wait_for(state="attached")
    item.dispatch_event("click")


def test_stack_of_a_running_task_why_a_wait_waits_and_a_paused_task(
        notebook: NotebookPage, tmp_path: Any) -> None:
    page = notebook.page
    gate = tmp_path / "gate"
    notebook.run_cell(GATE_CELL.replace("GATE", repr(str(gate))), wait=False)
    page.wait_for_selector(f'{PANEL} li[data-task-name="at_gate"][data-task-state="running"]')

    # The cell is blocked in get on a task starved of CPUs: its wait row says why, from the
    # kernel's control channel (the shell is busy with the cell).
    why = page.locator(f'{PANEL} .nbdist-wait[data-wait-done="false"] .nbdist-wait-why')
    why.wait_for(state="visible", timeout=30_000)
    text = why.inner_text()
    assert "'starved'" in text and "not started" in text, text
    assert "held by task 'at_gate' running for" in text, text

    # The selected running task shows its current Python stack, asked again while selected.
    select(notebook, "at_gate")
    stack = page.locator(f"{PANEL} .nbdist-details pre.nbdist-stack")
    page.wait_for_function(
        """() => { const s = document.querySelector('#nbdist-panel pre.nbdist-stack');
                   return s && s.textContent.includes('in hold_here'); }""", timeout=30_000)
    text = stack.inner_text()
    assert "task 'at_gate'" in text and "return hold_here()" in text, text
    assert "worker.py" not in text  # the engine's frames are left out
    first = stack.get_attribute("data-asked")
    page.wait_for_function(
        """(first) => { const s = document.querySelector('#nbdist-panel pre.nbdist-stack');
                        return s && s.dataset.asked && s.dataset.asked !== first; }""",
        arg=first, timeout=15_000)
    notebook.screenshot("debug-1-stack-and-why")
    assert cell_running(notebook)

    gate.write_text("open")
    notebook.wait_run()
    assert page.locator(".jp-OutputArea-output", has_text="result ").last.inner_text().strip() \
        == "result fed"
    page.wait_for_selector(f'{PANEL} .nbdist-wait[data-wait-done="true"] .nbdist-wait-why',
                           state="hidden")

    # A task paused at breakpoint() with no cell waiting on it shows as paused.
    notebook.run_cell(PAUSE_CELL)
    page.wait_for_selector(f'{PANEL} li[data-task-name="pauses"][data-paused="true"]',
                           timeout=30_000)
    assert "paused in the debugger" in page.locator(
        f'{PANEL} li[data-task-name="pauses"]').inner_text()
    assert page.locator(f"{PANEL} .nbdist-legend-paused").inner_text() == "paused"
    select(notebook, "pauses")
    paused_at = page.locator(f"{PANEL} .nbdist-details dt", has_text="paused at")
    paused_at.wait_for()
    assert "(pauses)" in page.locator(f"{PANEL} .nbdist-details dd",
                                      has_text="%nbdist debug attaches").inner_text()
    notebook.screenshot("debug-2-paused")

    # Continued (as `c` at the %nbdist debug prompt would), it finishes and is paused no more.
    notebook.run_cell("from nbdist.util import pdb as remote_pdb\n"
                      "assert remote_pdb.attach('pauses', ask=lambda prompt: 'c',"
                      " show=lambda text: None) == 'continue'\n"
                      "assert nbdist.get(paused_ref) == 42")
    page.wait_for_selector(f'{PANEL} li[data-task-name="pauses"][data-task-state="finished"]'
                           '[data-paused="false"]')

"""The inline view (``nbdist.show()``) off the page, in JupyterLab:

- after a cell that changed the state, the kernel writes the view's output again (its static
  form follows the state) and JupyterLab draws a new view of the widget, leaving the old one
  detached from the page but never removed: the old views stop folding the kernel's messages
  (before, every cell added one more board doing a live view's work for every message);
- a view taken off the page (as a windowed notebook does with cells out of view) stops too,
  and put back, catches up with the kernel from a fresh snapshot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lab_session import LabServer, NotebookPage
from polling import TESTS_DIR, poll

pytestmark = pytest.mark.timeout(240)

ROOTS = ".jp-OutputArea-output .nbdist-inline.nbdist-widget"

# In-page: every inline view's root seen so far (kept across calls, detached ones too), as
# [on the page, sequence number of the kernel message on screen].
SEEN = """(sel) => {
    const seen = window.__inlineRoots = window.__inlineRoots || [];
    for (const r of document.querySelectorAll(sel)) {
        if (!seen.includes(r)) { seen.push(r); }
    }
    return seen.map(r => [r.isConnected, Number(r.dataset.renderedSeq || -1)]);
}"""

# In-page: tasks shown finished by the view on the page.
FINISHED = """(sel) => {
    const live = [...document.querySelectorAll(sel)].filter(r => r.isConnected);
    if (live.length !== 1) { return -1; }
    return live[0].querySelectorAll('.nbdist-graph-nodes li[data-task-state="finished"]').length;
}"""


def _finished(page: Any, n: int) -> None:
    page.wait_for_function(f"(sel) => ({FINISHED})(sel) === {n}", arg=ROOTS)


def test_views_jupyterlab_left_detached_stop_following_the_kernel(
        lab: LabServer, notebook: NotebookPage) -> None:
    page = notebook.page
    notebook.run_cell("import nbdist\nnbdist.init(num_cpus=2)\n\n@nbdist.remote\ndef inc(x):\n    return x + 1")
    notebook.run_cell("view = nbdist.show()")
    page.wait_for_selector(f'{ROOTS}[data-cluster="true"]')
    page.evaluate(SEEN, ROOTS)
    for k in range(3):
        notebook.run_cell("nbdist.get([inc.remote(i) for i in range(5)])")
        _finished(page, 5 * (k + 1))
        page.evaluate(SEEN, ROOTS)
    seen = page.evaluate(SEEN, ROOTS)
    detached = [seq for on_page, seq in seen if not on_page]
    # What this is about: the output was written again after the cells, and the views drawn
    # before are detached, not removed.
    assert len(detached) >= 2, seen
    assert sum(on_page for on_page, _seq in seen) == 1, seen

    notebook.run_cell("nbdist.get([inc.remote(i) for i in range(5)])")
    _finished(page, 20)
    after = page.evaluate(SEEN, ROOTS)
    live = [seq for on_page, seq in after if on_page]
    assert [seq for on_page, seq in after[:len(detached)] if not on_page] == detached, after
    assert all(seq < live[0] for seq in detached), after


def test_a_view_off_the_page_stops_and_catches_up_when_back(
        lab: LabServer, notebook: NotebookPage, tmp_path: Path) -> None:
    page = notebook.page
    _finished(page, 20)
    seq = page.evaluate("""(sel) => {
        const root = [...document.querySelectorAll(sel)].find(r => r.isConnected);
        const host = root.parentElement, parent = host.parentElement, next = host.nextSibling;
        parent.removeChild(host);
        window.__putBack = () => parent.insertBefore(host, next);
        window.__offPage = root;
        return Number(root.dataset.renderedSeq);
    }""", ROOTS)
    # Work done while the view is off the page, by a thread of the kernel once the cell has
    # ended (after a cell that changed the state, its view's output is written again).
    gate, done = tmp_path / "gate", tmp_path / "done"
    notebook.run_cell(
        f"import os, sys, threading\nsys.path.insert(0, {TESTS_DIR!r})\nfrom polling import until\n\n"
        "def _work():\n"
        f"    until(lambda: os.path.exists({str(gate)!r}), timeout=60)\n"
        "    nbdist.get([inc.remote(i) for i in range(7)])\n"
        f"    open({str(done)!r}, 'w').close()\n\n"
        "threading.Thread(target=_work).start()")
    page.evaluate("""() => {
        const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
        window.__finishedSent = 0;
        kernel.anyMessage.connect((_, args) => {
            const data = args.msg.content && args.msg.content.data;
            const msg = data && data.method === 'custom' ? data.content : null;
            if (args.direction === 'recv' && msg && msg.totals) {
                window.__finishedSent = Math.max(window.__finishedSent, msg.totals.finished);
            }
        });
    }""")
    gate.write_text("open")
    poll(done.exists, timeout=60, what="the kernel's thread to finish its tasks")
    # The kernel's messages with the tasks finished reached the page; the view off it did not
    # fold them.
    page.wait_for_function("() => window.__finishedSent >= 27")
    assert page.evaluate("() => Number(window.__offPage.dataset.renderedSeq)") == seq

    # (Another view of the widget may have been drawn in its output meanwhile: this one is
    # watched.)
    page.evaluate("() => window.__putBack()")
    page.wait_for_function(
        "() => window.__offPage.querySelectorAll("
        "'.nbdist-graph-nodes li[data-task-state=\"finished\"]').length === 27")
    assert page.evaluate("() => Number(window.__offPage.dataset.renderedSeq)") > seq
    notebook.run_cell("view.close()\nnbdist.shutdown()")

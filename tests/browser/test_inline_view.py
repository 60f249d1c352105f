"""The inline view (``nbdist.show()``, an anywidget drawn by the panel's own code) in real
frontends, with every request off this machine aborted:

- JupyterLab: the view in a cell's output fills its graph live as a later cell runs tasks;
  after a Tune search, its graph shows the trials (one lane each) and no Tune plumbing until
  "library calls" is ticked; a running task selected in it shows its current stack;
- Notebook 7 (the ``notebook`` package, started here): the same view renders and fills up
  live, with no code of Notebook 7's own;
- a static HTML export (nbconvert, no widget state, as a notebook saved without it): the last
  graph drawn as SVG, read in a page with no network at all.

Screenshots: test-artifacts/browser/inline-lab.png, inline-notebook7.png, inline-static.png.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lab_session import (
    LabServer,
    NotebookPage,
    free_port,
    remove_tree,
    temp_root,
    write_notebook,
)

pytestmark = pytest.mark.timeout(300)

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"
INLINE = ".jp-OutputArea-output .nbdist-inline"
NODES = f"{INLINE} .nbdist-graph-nodes li"
OFF_MACHINE = re.compile(r"^(?!http://127\.0\.0\.1)(https?|wss?)://")

TASKS = """
@nbdist.remote
def inc(x):
    return x + 1

refs = [inc.remote(i) for i in range(6)]
total = nbdist.get([inc.remote(r) for r in refs])
"""

SEARCH = """
from nbdist import tune

def trainable(config):
    for i in range(3):
        tune.report({"loss": config["lr"] / (i + 1)})

tune.Tuner(trainable, param_space={"lr": tune.grid_search([0.1, 1.0])},
           tune_config=tune.TuneConfig(metric="loss", mode="min")).fit()
"""


GATED = """
import os, time

@nbdist.remote
def at_gate(path):
    def hold_here():
        while not os.path.exists(path):
            time.sleep(0.05)  # the task's work: waiting for the test to open the gate
        return "open"
    return hold_here()

gated = at_gate.remote(GATE)
"""


def _block_outside(page: Any) -> list[str]:
    outside: list[str] = []

    def block(route: Any) -> None:
        outside.append(route.request.url)
        route.abort()
    page.context.route(OFF_MACHINE, block)
    return outside


def _node_count(page: Any, selector: str = NODES) -> int:
    return int(page.locator(selector).count())


def test_the_view_fills_up_live_in_a_lab_cell_and_folds_a_tune_search(
        lab: LabServer, notebook: NotebookPage, tmp_path: Path) -> None:
    page = notebook.page
    outside = _block_outside(page)
    notebook.run_cell("import nbdist\nnbdist.init(num_cpus=2)")
    notebook.run_cell("view = nbdist.show()")
    page.locator(INLINE).first.wait_for(state="visible")
    page.wait_for_selector(f'{INLINE}[data-link-status="connected"]')
    notebook.run_cell(TASKS)
    page.wait_for_function("(sel) => document.querySelectorAll(sel).length >= 12", arg=NODES)
    states = page.locator(NODES).evaluate_all("items => items.map(i => i.dataset.taskState)")
    page.wait_for_function(
        "(sel) => [...document.querySelectorAll(sel)].every(i => i.dataset.taskState === "
        "'finished')", arg=NODES)
    assert len(states) == 12

    notebook.run_cell(SEARCH, timeout=120)
    work = f'{NODES}[data-library-role="work"]'
    page.wait_for_function("(sel) => document.querySelectorAll(sel).length === 2", arg=work)
    assert _node_count(page, f'{NODES}[data-library-role="control"]') == 0
    page.locator(INLINE).first.scroll_into_view_if_needed()
    notebook.screenshot("inline-lab")
    page.locator(f"{INLINE} .nbdist-show-internal").first.check()
    page.wait_for_function(
        "(sel) => document.querySelectorAll(sel).length > 0",
        arg=f'{NODES}[data-library-role="control"]')
    # The toggle's state reached the kernel's widget.
    notebook.run_cell("assert view.widget.show_internal")

    # A selected running task shows its current stack in the view's details too (asked over
    # the widget's own messages: the kernel is idle while the task runs).
    gate = tmp_path / "gate"
    notebook.run_cell(GATED.replace("GATE", repr(str(gate))))
    item = page.locator(f'{NODES}[data-task-name="at_gate"][data-task-state="running"]').first
    item.wait_for(state="attached")
    item.dispatch_event("click")
    page.wait_for_function(
        "(sel) => [...document.querySelectorAll(sel)].some(s => "
        "s.textContent.includes('in hold_here'))", arg=f"{INLINE} pre.nbdist-stack")
    gate.write_text("open")
    notebook.run_cell("assert nbdist.get(gated, timeout=60) == 'open'")
    notebook.run_cell("view.close()\nnbdist.shutdown()")
    assert outside == [], outside


class NotebookServer(LabServer):
    """Notebook 7 (``python -m notebook``) on a free port, in its own temp settings."""

    @classmethod
    def start(cls, root: Path) -> NotebookServer:
        home = root / ".nb"
        home.mkdir(parents=True)
        env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
                   JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
                   JUPYTER_RUNTIME_DIR=str(home / "runtime"))
        port, token = free_port(), secrets.token_hex(16)
        log = home / "server.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "notebook", "--no-browser", "--allow-root",
                 f"--port={port}", "--ip=127.0.0.1", f"--IdentityProvider.token={token}",
                 f"--ServerApp.root_dir={root}", "--JupyterNotebookApp.expose_app_in_browser=True",
                 "--ServerApp.port_retries=0"],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        server = cls(proc, port, token, root, log)
        try:
            server._wait_ready()
        except BaseException:
            server.stop()
            raise
        return server

    def notebook_url(self, name: str) -> str:
        return f"{self.url}/notebooks/{name}?token={self.token}"


@pytest.fixture(scope="module")
def notebook7() -> Iterator[NotebookServer]:
    root = temp_root("nbdist-nb7-")
    try:
        server = NotebookServer.start(root)
        try:
            yield server
        finally:
            server.stop()
    finally:
        remove_tree(root)


def test_the_view_fills_up_live_in_notebook_7(notebook7: NotebookServer, chromium: Any) -> None:
    write_notebook(notebook7.root / "nb7.ipynb", ["import nbdist"])
    page = chromium.new_page()
    page.set_default_timeout(30_000)
    outside = _block_outside(page)
    try:
        nb = NotebookPage(page, ARTIFACTS, "nb7.ipynb")
        nb.open(notebook7.notebook_url("nb7.ipynb"))
        nb.run_cell("import nbdist\nnbdist.init(num_cpus=2)\nview = nbdist.show()")
        page.wait_for_selector(f'{INLINE}[data-link-status="connected"]')
        assert _node_count(page) == 0
        nb.run_cell("import time\n@nbdist.remote\ndef slow(i):\n    time.sleep(0.3)\n"
                    "    return i\n\nrefs = [slow.remote(i) for i in range(8)]", wait=True)
        # Live: nodes appear, and some finish while others still run, before any get.
        page.wait_for_function("(sel) => document.querySelectorAll(sel).length === 8", arg=NODES)
        page.wait_for_function(
            "(sel) => [...document.querySelectorAll(sel)].some(i => i.dataset.taskState === "
            "'finished')", arg=NODES)
        nb.run_cell("assert nbdist.get(refs) == list(range(8))")
        page.wait_for_function(
            "(sel) => [...document.querySelectorAll(sel)].every(i => i.dataset.taskState === "
            "'finished')", arg=NODES)
        nb.screenshot("inline-notebook7")
        nb.run_cell("view.close()\nnbdist.shutdown()")
    finally:
        page.close()
    assert outside == [], outside


def test_a_static_export_shows_the_last_graph_with_no_network(
        tmp_path: Path, chromium: Any) -> None:
    import nbformat
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter

    path = tmp_path / "static.ipynb"
    write_notebook(path, ["import nbdist\nnbdist.init(num_cpus=2)\nview = nbdist.show()",
                          TASKS, "nbdist.shutdown()"])
    nb = nbformat.read(path, as_version=4)
    # As a notebook saved without widget state (JupyterLab's default) is exported.
    NotebookClient(nb, kernel_name="python3", timeout=120, store_widget_state=False).execute()
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    page_file = tmp_path / "static.html"
    page_file.write_text(body, encoding="utf-8")
    page = chromium.new_page()
    requests: list[str] = []
    page.route("**/*", lambda route: (requests.append(route.request.url), route.continue_()
                                      if route.request.url.startswith("file://")
                                      else route.abort()))
    try:
        page.goto(page_file.as_uri())
        nodes = page.locator("svg.nbdist-snapshot-graph g.nbdist-snapshot-node")
        assert nodes.count() == 12
        states = nodes.evaluate_all("gs => gs.map(g => g.dataset.taskState)")
        assert set(states) == {"finished"}
        assert "snapshot (not live)" in page.locator(".nbdist-snapshot-summary").inner_text()
        page.locator("svg.nbdist-snapshot-graph").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "inline-static.png"))
    finally:
        page.close()
    outputs = [o for cell in nb.cells for o in cell.get("outputs", [])]
    assert any("text/html" in o.get("data", {}) and "nbdist-snapshot" in o["data"]["text/html"]
               for o in outputs), json.dumps(outputs)[:2000]

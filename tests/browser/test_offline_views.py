"""nbdist's inline bokeh views in a browser that cannot reach the internet.

Every request the page makes outside the JupyterLab server is aborted (``context.route``), as on
a machine offline or behind a proxy, so BokehJS can only come from the kernel's own output. The
tests run in file order on one notebook and kernel: `%nbdist timeline` twice, then a page
reload with the outputs cleared and `%nbdist timeline` once more. Each check reads
the live bokeh views in the page (``Bokeh.index``): a figure whose data source has a given
name must hold the expected rows and its canvas must show pixels of the "finished" colour,
i.e. its glyphs were drawn (older views of a figure may linger in the index: the checks look
for one that matches). The inline live view (``nbdist.show()``) needs no BokehJS: its offline
test is tests/browser/test_inline_view.py. Screenshots go to test-artifacts/browser/.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lab_session import LabServer, NotebookPage, write_notebook

from nbdist.jupyter.plots import COLORS

pytestmark = pytest.mark.timeout(180)

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"
NOTEBOOK = "offline.ipynb"
TASKS = 8

# In-page: for every bokeh root view drawing a data source named `name`, its row count and how
# many pixels of its canvas have the colour `rgb` (canvas pixels are what the user sees).
DRAWN = """([name, rgb]) => {
    const Bokeh = window.Bokeh;
    if (Bokeh === undefined || Bokeh.index === undefined) return [];
    const found = [];
    for (const view of Bokeh.index.roots) {
        const renderers = view.model.renderers || [];
        const glyphs = renderers.find(r => r.data_source && r.data_source.name === name);
        if (glyphs === undefined || view.canvas_view === undefined) continue;
        const canvas = view.canvas_view.primary.canvas;
        let hits = 0;
        if (canvas.width > 0 && canvas.height > 0) {
            const px = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
            for (let i = 0; i < px.length; i += 4) {
                if (Math.abs(px[i] - rgb[0]) <= 2 && Math.abs(px[i + 1] - rgb[1]) <= 2
                    && Math.abs(px[i + 2] - rgb[2]) <= 2 && px[i + 3] === 255) hits++;
            }
        }
        found.push({rows: glyphs.data_source.get_length(), hits: hits});
    }
    return found;
}"""

# In-page: how many outputs of the open notebook are bokeh's loader of BokehJS.
LOADERS = """let n = 0;
    for (const cell of nb.content.model.cells) {
        if (cell.type !== 'code') continue;
        for (const out of cell.outputs.toJSON()) {
            if (out.data && 'application/vnd.bokehjs_load.v0+json' in out.data) n++;
        }
    }
    return n;"""


def _rgb(hex_colour: str) -> list[int]:
    return [int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)]


FINISHED_RGB = _rgb(COLORS["finished"])


@pytest.fixture(scope="module")
def blocked() -> list[str]:
    return []


@pytest.fixture(scope="module")
def notebook(lab: LabServer, chromium: Any, blocked: list[str]) -> Iterator[NotebookPage]:
    """The notebook page, with every request outside the lab server aborted (and recorded)."""
    def only_the_lab(route: Any) -> None:
        url = route.request.url
        if url == lab.url or url.startswith(lab.url + "/"):
            route.continue_()
        else:
            blocked.append(url)
            route.abort()

    chromium.route("**/*", only_the_lab)
    write_notebook(lab.root / NOTEBOOK, ["import nbdist"])
    page = chromium.pages[0] if chromium.pages else chromium.new_page()
    page.set_default_timeout(30_000)
    page.on("console", lambda msg: None if "willReadFrequently" in msg.text
            else CONSOLE.append(f"{msg.type}: {msg.text}"[:300]))
    nb = NotebookPage(page, ARTIFACTS, NOTEBOOK)
    nb.open(lab.notebook_url(NOTEBOOK))
    yield nb
    chromium.unroute("**/*")


# The page's console, kept so that a view that never draws can say why.
CONSOLE: list[str] = []

# In-page: the output types of the notebook's last cell.
LAST_OUTPUTS = """const cells = nb.content.model.cells;
    const last = cells.get(cells.length - 1);
    return last.outputs.toJSON().map(o => o.output_type + ':' + Object.keys(o.data || {}).join(','));"""


def drawn(notebook: NotebookPage, source: str, rows: int, count: int = 1) -> None:
    """Wait until `count` figures drawing `source` with `rows` rows show their glyphs."""
    try:
        notebook.page.wait_for_function(
            f"(arg) => ({DRAWN})(arg).filter(v => v.rows === {rows} && v.hits > 0).length"
            f" >= {count}", arg=[source, FINISHED_RGB], timeout=30_000)
    except Exception as exc:
        views = notebook.page.evaluate(f"(arg) => ({DRAWN})(arg)", [source, FINISHED_RGB])
        raise AssertionError(
            f"{count} view(s) of {source!r} with {rows} rows drawn not found; views: {views};"
            f" last cell's outputs: {notebook.evaluate(LAST_OUTPUTS)};"
            f" console: {CONSOLE[-15:]}") from exc


def test_the_timeline_draws_its_bars_with_the_cdn_unreachable(
        notebook: NotebookPage, blocked: list[str]) -> None:
    notebook.run_cell("%load_ext nbdist\nimport nbdist")
    notebook.run_cell(
        "nbdist.init(num_cpus=2)\n\n"
        "@nbdist.remote\ndef square(x):\n    return x * x\n\n"
        f"assert nbdist.get([square.remote(i) for i in range({TASKS})]) == "
        f"[i * i for i in range({TASKS})]")
    notebook.run_cell("%nbdist timeline")
    drawn(notebook, "nbdist_timeline", TASKS)
    notebook.screenshot("offline-timeline")
    assert notebook.evaluate(LOADERS) == 1
    assert not [url for url in blocked if "bokeh" in url]


def test_a_second_timeline_in_the_same_page_does_not_send_bokehjs_again(
        notebook: NotebookPage) -> None:
    notebook.run_cell("%nbdist timeline")
    drawn(notebook, "nbdist_timeline", TASKS, count=2)
    assert notebook.evaluate(LOADERS) == 1


def test_after_a_page_reload_the_timeline_sends_bokehjs_again(notebook: NotebookPage) -> None:
    # Cleared and saved, the notebook brings no loader back with it: the fresh page has BokehJS
    # only if the kernel sends it again to this new connection.
    notebook.evaluate("await window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs');"
                      " await nb.context.save();")
    notebook.page.reload()
    notebook.wait_kernel_idle(NOTEBOOK)
    notebook.page.evaluate("async () => { await window.jupyterapp.restored; }")
    assert notebook.page.evaluate("() => window.Bokeh === undefined")
    notebook.run_cell("%nbdist timeline")
    drawn(notebook, "nbdist_timeline", TASKS)
    assert notebook.evaluate(LOADERS) == 1
    notebook.screenshot("offline-timeline-after-reload")
    notebook.run_cell("nbdist.shutdown()")

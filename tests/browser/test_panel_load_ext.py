"""A notebook's own ``%load_ext nbdist`` after the panel loaded the extension in its kernel.

The teaching notebooks start with ``%load_ext nbdist``; with the panel open, the panel has
already loaded it when that cell runs, and the cell must print nothing.
"""

from __future__ import annotations

import json

import pytest
from lab_session import NotebookPage

pytestmark = pytest.mark.timeout(180)

PANEL = "#nbdist-panel"


def test_load_ext_after_the_panel_loaded_the_extension_prints_nothing(
        notebook: NotebookPage) -> None:
    page = notebook.page
    notebook.open_panel()
    page.wait_for_selector(f'{PANEL}[data-link-status="connected"]')
    notebook.run_cell("%load_ext nbdist")
    outputs = notebook.evaluate(
        "const cells = nb.content.model.toJSON().cells;"
        "return JSON.stringify(cells[cells.length - 1].outputs);")
    assert json.loads(outputs) == []
    notebook.run_cell("%nbdist start --num-cpus 1")
    notebook.run_cell("%nbdist stop")
    notebook.evaluate("await nb.sessionContext.shutdown(); nb.dispose();")

"""Run a teaching notebook top to bottom through a real kernel (nbclient).

``run_notebook(name)`` executes ``notebooks/<name>`` with the venv's ``python3`` kernel (which
imports nbdist from this checkout) and returns the executed notebook; nbclient raises
CellExecutionError on the first failing cell, so a broken notebook fails its test with the
cell and traceback. ``cell_text(nb)`` flattens every cell's stdout and results for assertions.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _run(name: str, timeout: int = 120) -> Any:
    """``timeout``: seconds for each cell (generous: the suite runs beside other work)."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=timeout,
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    return nb


def _text(nb: Any) -> list[str]:
    out = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        parts = []
        for o in cell.outputs:
            if o.output_type == "stream":
                parts.append(o.text)
            elif o.output_type in ("execute_result", "display_data"):
                parts.append(o.data.get("text/html") or o.data.get("text/plain", ""))
        out.append("".join(parts))
    return out


@pytest.fixture
def run_notebook() -> Callable[[str], Any]:
    return _run


@pytest.fixture
def cell_text() -> Callable[[Any], list[str]]:
    """One string per code cell: its stdout, then its results (HTML where there is some)."""
    return _text

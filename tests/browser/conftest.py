"""Fixtures for the panel's browser tests (helpers in lab_session.py).

One JupyterLab server, one Chromium and one notebook page serve the whole module: starting
them costs seconds, and the tests are written to run in file order on the same notebook and
kernel. Everything is stopped in the finalizers, also when a test fails; a failing test leaves
a screenshot named after it in test-artifacts/browser/.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lab_session import (
    LabServer,
    NotebookPage,
    launch_chromium,
    remove_tree,
    temp_root,
    write_notebook,
)

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"


@pytest.fixture(scope="module")
def lab() -> Iterator[LabServer]:
    root = temp_root("nbdist-lab-")
    try:
        server = LabServer.start(root)
        try:
            yield server
        finally:
            server.stop()
    finally:
        remove_tree(root)


@pytest.fixture(scope="module")
def chromium(lab: LabServer) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    try:
        context = launch_chromium(playwright, lab.root / ".lab" / "chromium-profile")
        try:
            yield context
        finally:
            context.close()
    finally:
        playwright.stop()


@pytest.fixture(scope="module")
def notebook(lab: LabServer, chromium: Any) -> NotebookPage:
    write_notebook(lab.root / "panel.ipynb", ["import nbdist, time"])
    page = chromium.pages[0] if chromium.pages else chromium.new_page()
    page.set_default_timeout(30_000)
    nb = NotebookPage(page, ARTIFACTS, "panel.ipynb")
    nb.open(lab.notebook_url("panel.ipynb"))
    return nb


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    nb = item.funcargs.get("notebook") if hasattr(item, "funcargs") else None
    if report.when == "call" and report.failed and isinstance(nb, NotebookPage):
        try:
            nb.screenshot(f"FAILED-{item.name}")
        except Exception:  # the page may be gone; the test's own error matters more
            pass

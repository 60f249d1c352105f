"""The panel at its default split after the tuning and training notebooks: the user's work, not
the libraries' plumbing.

The panel is opened from a notebook (a split beside it, as a new user opens it) and
``notebooks/08-tune.ipynb`` then ``notebooks/07-training.ipynb`` run from top to bottom beside it
(07 without its TensorFlow section, which the notebook tests run: tests/notebooks). After each:
the default graph lists no call marked as a library's plumbing, and every box is a user
function, a trial or a rank (08: a lane per trial; 07: a lane per rank); "library calls" shows
the polls and checks; the Runs view is up; 07's Waits view lists none of Train's waits. Screenshots of the panel go to
test-artifacts/browser/panel-08-tune.png and panel-07-training.png (copied into docs/images by
hand for docs/panel.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from lab_session import LabServer, NotebookPage, write_notebook
from test_panel_views import ARTIFACTS, run_teaching_notebook

pytestmark = pytest.mark.timeout(600)

PANEL = "#nbdist-panel"
NODES = f"{PANEL} .nbdist-graph-nodes li"
# Names of the libraries' own calls: none may be drawn by default.
PLUMBING = ("TrialActor.", "TrainWorker.", "bundle_reservation_check", "_Aggregator.",
            "Coordinator.")


@pytest.fixture(scope="module")
def notebook(lab: LabServer, chromium: Any) -> Iterator[NotebookPage]:
    write_notebook(lab.root / "views.ipynb", ["1 + 1"])
    page = chromium.pages[0] if chromium.pages else chromium.new_page()
    page.set_default_timeout(30_000)
    nb = NotebookPage(page, ARTIFACTS, "views.ipynb")
    nb.open(lab.notebook_url("views.ipynb"))
    box = nb.open_panel().bounding_box()
    assert box and 450 <= box["width"] <= 700, box  # the default split
    page.wait_for_selector(f'{PANEL}[data-link-status="connected"]')
    yield nb


def drawn(page: Any, role: str | None = None) -> list[dict[str, str]]:
    selector = NODES if role is None else f'{NODES}[data-library-role="{role}"]'
    return list(page.locator(selector).evaluate_all(
        "items => items.map(i => ({name: i.dataset.taskName, lane: i.dataset.lane || '',"
        " role: i.dataset.libraryRole || '', state: i.dataset.taskState}))"))


def check_folded(nb: NotebookPage, lane_prefix: str, members: int, shot: str) -> None:
    page = nb.page
    page.wait_for_function(
        "([sel, n]) => document.querySelectorAll(sel).length >= n",
        arg=[f'{NODES}[data-library-role="work"]', members], timeout=60_000)
    nodes = drawn(page)
    assert not [n for n in nodes if n["role"] == "control"]
    assert not [n for n in nodes if n["name"].startswith(PLUMBING)], nodes
    lanes = {n["lane"] for n in nodes if n["role"] == "work"}
    assert len({lane for lane in lanes if lane.startswith(lane_prefix)}) >= members, lanes
    assert page.locator(f"{PANEL} .nbdist-runs:not([hidden])").count() == 1
    page.locator(f"{PANEL} .nbdist-graph").scroll_into_view_if_needed()
    page.locator(PANEL).screenshot(path=str(ARTIFACTS / f"{shot}.png"))
    page.locator(f"{PANEL} .nbdist-show-internal").check()
    page.wait_for_function("(sel) => document.querySelectorAll(sel).length > 0",
                           arg=f'{NODES}[data-library-role="control"]')
    page.locator(f"{PANEL} .nbdist-show-internal").uncheck()
    page.wait_for_function("(sel) => document.querySelectorAll(sel).length === 0",
                           arg=f'{NODES}[data-library-role="control"]')


def test_after_the_tune_notebook_the_graph_shows_trials(notebook: NotebookPage,
                                                        lab: LabServer) -> None:
    run_teaching_notebook(notebook, lab, "08-tune.ipynb")
    check_folded(notebook, "member:tune:", 4, "panel-08-tune")


def test_after_the_training_notebook_the_graph_shows_ranks(notebook: NotebookPage,
                                                           lab: LabServer) -> None:
    run_teaching_notebook(notebook, lab, "07-training.ipynb")
    check_folded(notebook, "member:train:", 2, "panel-07-training")
    ranks = {n["name"] for n in drawn(notebook.page, "work")}
    assert {"rank 0", "rank 1"} <= ranks, ranks
    # The notebook waits on nothing itself: every wait was Train's, and none is listed.
    assert notebook.page.locator(f"{PANEL} .nbdist-wait").count() == 0


"""tqdm_ray bars from tasks in a real kernel: one widget in the submitting cell, updated in
place, and none of the bar's marked lines in the cell's text."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kernel_session import KernelSession, start_kernel, stop_kernel

pytestmark = pytest.mark.timeout(180)

WIDGET = "application/vnd.jupyter.widget-view+json"

COUNT = """
@nbdist.remote
def count(n):
    for _ in tqdm_ray.tqdm(range(n), desc="counting", flush_interval_s=0):
        pass
    print("after the bar")
    return n
"""


@pytest.fixture
def kernel_importing_tqdm_first() -> Iterator[KernelSession]:
    """tqdm_ray imported before ``%load_ext nbdist``: the order users meet in scripts."""
    session = start_kernel()
    try:
        session.ok("from nbdist.experimental import tqdm_ray\nimport nbdist")
        session.ok("%load_ext nbdist\n%nbdist start --num-cpus 2")
        yield session
    finally:
        stop_kernel(session)


def _models(k: KernelSession, name: str) -> list[str]:
    return [m["content"]["comm_id"] for m in list(k.iopub) if m["msg_type"] == "comm_open"
            and m["content"]["data"].get("state", {}).get("_model_name") == name]


def _state_of(k: KernelSession, comm_id: str) -> dict[str, Any]:
    """The widget's state as the frontend would hold it: its open state, then each update."""
    state: dict[str, Any] = {}
    for m in list(k.iopub):
        if m["msg_type"] in ("comm_open", "comm_msg") and m["content"]["comm_id"] == comm_id:
            state.update(m["content"]["data"].get("state", {}))
    return state


def test_a_bar_in_a_task_is_one_widget_in_its_cell(
        kernel_importing_tqdm_first: KernelSession) -> None:
    k = kernel_importing_tqdm_first
    k.ok(COUNT)
    before = set(_models(k, "IntProgressModel"))
    _, cell = k.execute("nbdist.get(count.remote(5))")
    k.wait_for(lambda: "after the bar" in k.text_for(cell), 30, "the task's own line")
    [bar] = [b for b in _models(k, "IntProgressModel") if b not in before]
    k.wait_for(lambda: _state_of(k, bar).get("bar_style") == "success", 30,
               "the bar marked done")
    state = _state_of(k, bar)
    assert (state["value"], state["max"]) == (5, 5)
    views = [m for m in k.messages_for(cell)
             if m["msg_type"] == "display_data" and WIDGET in m["content"]["data"]]
    assert len(views) == 1  # the bar's box, shown once in the cell that submitted the task
    [label] = [c for c in _models(k, "HTMLModel")
               if "counting: 5/5" in str(_state_of(k, c).get("value"))]
    assert "count pid=" in _state_of(k, label)["value"]
    texts = "".join(m["content"].get("text", "") for m in list(k.iopub)
                    if m["msg_type"] == "stream")
    assert "__nbdist_tqdm_ray__" not in texts and "counting" not in texts


def test_a_bar_in_the_driver_is_a_widget_in_the_running_cell(
        kernel_importing_tqdm_first: KernelSession) -> None:
    k = kernel_importing_tqdm_first
    before = set(_models(k, "IntProgressModel"))
    _, cell = k.execute("for _ in tqdm_ray.tqdm(range(3), desc='local', flush_interval_s=0):\n"
                        "    pass")
    [bar] = [b for b in _models(k, "IntProgressModel") if b not in before]
    state = _state_of(k, bar)
    assert (state["value"], state["max"], state["bar_style"]) == (3, 3, "success")
    views = [m for m in k.messages_for(cell)
             if m["msg_type"] == "display_data" and WIDGET in m["content"]["data"]]
    assert len(views) == 1 and not k.text_for(cell)


def test_the_notebook_reads_the_marks_tqdm_ray_writes() -> None:
    from nbdist.experimental import tqdm_ray
    from nbdist.jupyter import tqdm_view

    assert tqdm_view.MARK == tqdm_ray.MAGIC
    state = {"uuid": "u", "desc": "d<b>", "total": 4, "x": 2, "closed": False}
    assert tqdm_view.parse("(w pid=1) " + tqdm_ray.MAGIC + json.dumps(state)) == state
    assert tqdm_view.parse("plain") is None
    assert tqdm_view.bar_label({**state, "task": "f", "pid": 7}) == "d&lt;b&gt;: 2/4 (f pid=7)"

"""A dataset's execution in the views: one run per execution, one member (lane) per operator
with its blocks, rows, bytes and blocks in flight, published only by executions that last
over a second, and drawn inline as lanes."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from polling import poll

import nbdist
from nbdist import data as rd
from nbdist.jupyter.runs import RunsFold
from nbdist.jupyter.runview import lanes_html, title_html

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("cluster")]


def _slow(batch: dict) -> dict:
    time.sleep(0.25)  # deliberate sleep: a block's work, so the run lasts over a second
    return {"id": batch["id"] * 2}


def test_a_long_execution_is_a_run_with_one_lane_per_operator() -> None:
    seen: list[Any] = []
    lock = threading.Lock()

    def collect(batch: list[Any]) -> None:
        with lock:
            seen.extend(e for e in batch if e.library == "data")

    rd.range(100, override_num_blocks=4).map_batches(lambda b: b).sum("id")  # workers warm
    unsubscribe = nbdist.events.subscribe(collect, kinds=["run_update"])
    try:
        assert rd.range(10).take(1) == [{"id": 0}]  # a short execution: no run
        ds = rd.range(1200, override_num_blocks=12).map_batches(_slow).sort("id")
        assert ds.count() == 1200
        poll(lambda: sum(e.status == "TERMINATED" for e in seen) == 2, timeout=10,
             what="the long execution's final records")
    finally:
        unsubscribe()
    with lock:
        records = list(seen)
    assert len({e.run for e in records}) == 1  # only the long execution became a run
    fold = RunsFold()
    for e in records:
        fold.apply(e)
    [run] = fold.snapshot().values()
    assert list(run["members"]) == ["ReadRange->MapBatches(_slow)", "Sort"]
    for member in run["members"].values():
        assert member["status"] == "TERMINATED"
        assert member["metrics"]["rows"] == 1200 and member["metrics"]["in_flight"] == 0
    assert run["members"]["ReadRange->MapBatches(_slow)"]["metrics"]["blocks"] == 12
    html = lanes_html(run)
    assert html.count("data-lane=") == 2
    assert "data-lane='ReadRange-&gt;MapBatches(_slow)' data-blocks='12' data-in-flight='0'" \
        in html
    assert "1,200 rows" in html and "2 operators (2 terminated)" in title_html(run)
    # While it ran, the map's lane showed blocks in flight.
    assert any(dict(e.metrics)["in_flight"] > 0 for e in records
               if e.member.startswith("ReadRange") and e.status == "RUNNING")

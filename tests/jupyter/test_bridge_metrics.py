"""The application metrics and placement groups reach the panel through the comm bridge.

A real kernel plays the notebook (tasks record a Counter, a Gauge and a Histogram; a placement
group is reserved) and the test plays the panel on its "nbdist" comm, as test_bridge.py does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import polling
import pytest
from jupyter_client.manager import start_new_kernel
from test_bridge import Panel, poll

from nbdist.jupyter import schema
from nbdist.jupyter.model import SCHEMA_VERSION

pytestmark = pytest.mark.timeout(120)

RECORD = """
from nbdist.util import metrics
from nbdist.util.placement_group import placement_group

@nbdist.remote
def serve(i):
    metrics.Counter("requests", "requests served", tag_keys=("route",)).inc(
        tags={"route": "/a"})
    metrics.Histogram("latency_s", "time to serve", boundaries=[0.1, 1.0]).observe(0.05 * i)
    return i

@nbdist.remote
def measure(depth):
    metrics.Gauge("queue_depth", "items waiting").set(depth)

nbdist.get([serve.remote(i) for i in range(1, 5)])
nbdist.get(measure.remote(7))
pg = placement_group([{"CPU": 1}], strategy="SPREAD", name="trainers")
nbdist.get(pg.ready(), timeout=30)
"""


@pytest.fixture(scope="module")
def panel() -> Iterator[Panel]:
    km, kc = start_new_kernel(kernel_name="python3", env=polling.importable_env())
    p = Panel(km, kc)
    try:
        p.run("import nbdist, nbdist.jupyter.bridge as b; hub = b.register()\n"
              "nbdist.init(num_cpus=2)")
        yield p
    finally:
        try:
            p.run("nbdist.shutdown()", timeout=20)
        finally:
            p.close()
            kc.stop_channels()
            km.shutdown_kernel(now=True)


def latest(panel: Panel, comm: str, key: str) -> Any:
    """What the panel holds for ``key``: the last message that carried it (None: none did)."""
    carried = [d[key] for d in panel.comm_data(comm) if key in d]
    return carried[-1] if carried else None


def by_name(rows: list[dict[str, Any]] | None) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in rows or []}


def _fields_declared(row: dict[str, Any], td: type) -> None:
    required, optional = td.__required_keys__, td.__optional_keys__  # type: ignore[attr-defined]
    assert required <= set(row) <= required | optional, (td.__name__, sorted(row))


def test_metrics_and_placement_groups_arrive_and_follow_changes(panel: Panel) -> None:
    comm = panel.open_comm({"schema": SCHEMA_VERSION})
    first = poll(lambda: panel.comm_data(comm), 20, "the snapshot")[0]
    assert first["type"] == "snapshot" and "metrics" not in first  # nothing recorded yet
    panel.run(RECORD)

    def recorded() -> dict[str, dict[str, Any]] | None:
        rows = by_name(latest(panel, comm, "metrics"))
        wanted = (rows.get("requests", {}).get("value") == 4.0
                  and rows.get("latency_s", {}).get("count") == 4
                  and rows.get("queue_depth", {}).get("value") == 7.0)
        return rows if wanted else None

    rows = poll(recorded, 30, "a message with the counter at 4, the gauge at 7, 4 latencies")
    for row in rows.values():
        _fields_declared(row, schema.AppMetric)
    assert rows["requests"]["kind"] == "counter" and rows["requests"]["tags"] == {"route": "/a"}
    assert rows["queue_depth"]["kind"] == "gauge" and rows["queue_depth"]["tags"] == {}
    latency = rows["latency_s"]
    assert (latency["kind"], latency["boundaries"], latency["buckets"]) == (
        "histogram", [0.1, 1.0], [2, 2, 0])
    assert latency["sum"] == pytest.approx(0.5)
    assert latency["description"] == "time to serve"

    groups = poll(lambda: latest(panel, comm, "placement_groups"), 20, "the placement group")
    [group] = groups
    _fields_declared(group, schema.PlacementGroup)
    assert (group["name"], group["strategy"], group["bundles"]) == (
        "trainers", "SPREAD", [{"CPU": 1.0}])
    assert group["state"] == "CREATED"

    # Live: a new value reaches the panel in a delta; deltas that bring other news (a task's
    # records) do not repeat unchanged metrics.
    seen = len(panel.comm_data(comm))
    panel.run("nbdist.get(measure.remote(2))")
    poll(lambda: by_name(latest(panel, comm, "metrics"))["queue_depth"]["value"] == 2.0, 30,
         "the gauge's new value")
    changed = [d for d in panel.comm_data(comm)[seen:] if "metrics" in d]
    assert changed and all(d["type"] == "delta" for d in changed)
    mark = len(panel.comm_data(comm))
    panel.run("nbdist.get(pg.ready(), timeout=30)")  # a task that records no metric
    poll(lambda: any(d["type"] == "delta" and d["tasks"] for d in panel.comm_data(comm)[mark:]),
         20, "a delta with the task")
    assert not any("metrics" in d for d in panel.comm_data(comm)[mark:])
    # The reads are nbdist's machinery, not the notebook's work: the panel shows the tasks and
    # the 5 gets the cells ran, no call on the metrics actor, no wait on one.
    messages = panel.comm_data(comm)
    names = {t["name"] for d in messages for t in d.get("tasks", {}).values()}
    assert names == {"serve", "measure", "bundle_reservation_check"}
    assert len({w for d in messages for w in d.get("waits", {})}) == 5

    snap_at = len(panel.comm_data(comm))
    panel.send("comm_msg", {"comm_id": comm, "data": {"type": "request_snapshot"}})
    snap = poll(lambda: [d for d in panel.comm_data(comm)[snap_at:] if d["type"] == "snapshot"],
                20, "a snapshot on request")[0]
    assert by_name(snap["metrics"])["queue_depth"]["value"] == 2.0
    assert [g["name"] for g in snap["placement_groups"]] == ["trainers"]
    panel.send("comm_close", {"comm_id": comm, "data": {}})

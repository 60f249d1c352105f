"""``nbdist.show()``: the pure parts (summary, object table, waits, graph and timeline columns)
from hand-made records, then the live view in a real kernel — its widgets' state as tasks run
and finish, and its updates stopping when it is closed (from the kernel or from the frontend)
or when the cluster stops. One kernel for the module; the last test restarts its cluster.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from kernel_session import KernelSession

from nbdist import events as ev
from nbdist.events.tally import Tally
from nbdist.events.tracing import Execution
from nbdist.jupyter import liveview, plots
from nbdist.jupyter.model import Model

pytestmark = pytest.mark.timeout(120)

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
NODE = "0001000000aa"


# ---------------------------------------------------------------- pure parts
def _diamond_model() -> Model:
    """a -> b, a -> c, (b, c) -> d; a and b finished, c failed, d scheduled; one object."""
    m = Model()
    t = 1.0
    recs: list[ev.Event] = []
    for tid, deps in (("a", ()), ("b", ("a1",)), ("c", ("a1",)), ("d", ("b1", "c1"))):
        recs.append(ev.TaskSubmitted(t, tid, f"fn_{tid}", deps, (f"{tid}1",), None))
    recs += [ev.TaskStarted(t, "a", "fn_a", NODE, 11), ev.TaskFinished(t, "a", "fn_a", 0.1, NODE, 11),
             ev.ObjectCreated(t, "a1", 4096, NODE, "drv", "a", True),
             ev.TaskStarted(t, "b", "fn_b", NODE, 11), ev.TaskFinished(t, "b", "fn_b", 0.1, NODE, 11),
             ev.ObjectCreated(t, "b1", 10, NODE, "drv", "b", False),
             ev.TaskStarted(t, "c", "fn_c", NODE, 12),
             ev.TaskFailed(t, "c", "fn_c", "ValueError", "no", 0.1, 12),
             ev.WaitBegun(t, 7, "get", ("b1", "c1", "d1"), 3, 1),
             ev.WaitBegun(t, 8, "wait", ("a1",), 1, 1), ev.WaitDone(t, 8, 1, 1, False)]
    m.apply(recs)
    return m


def test_graph_columns_place_tasks_by_depth_and_colour_by_state() -> None:
    nodes, edges = plots.graph_data(_diamond_model().snapshot())
    pos = {i: (x, y) for i, x, y in zip(nodes["id"], nodes["x"], nodes["y"], strict=True)}
    assert pos["a"][0] == 0 and pos["b"][0] == pos["c"][0] == 1 and pos["d"][0] == 2
    assert pos["b"][1] != pos["c"][1]
    colour = dict(zip(nodes["id"], nodes["color"], strict=True))
    assert colour["a"] == plots.COLORS["finished"] and colour["c"] == plots.COLORS["failed"]
    assert colour["d"] == plots.COLORS["scheduled"]  # its arguments are ready
    lines = set(zip(edges["x0"], edges["x1"], strict=True))
    assert len(edges["x0"]) == 4 and lines == {(0.0, 1.0), (1.0, 2.0)}


def _grouped(records: list[ev.Event], threshold: int) -> Model:
    """A model past its grouping threshold, given the engine's tally of the same records (as
    the view gives it once grouped)."""
    m = Model(group_threshold=threshold)
    m.apply(records)
    folded = Tally()
    folded.fold(records)
    m.apply_summary(folded.snapshot(2.0))
    return m


def test_grouped_graph_shows_groups_with_counts_and_cuts_self_edges() -> None:
    recs: list[ev.Event] = []
    for i in range(6):  # a chain of add tasks: the add group feeds itself
        deps = (f"{2 * i - 1:018x}",) if i else ()
        recs.append(ev.TaskSubmitted(1.0, f"{2 * i:018x}", "add", deps, (f"{2 * i + 1:018x}",),
                                     None))
    recs.append(ev.TaskSubmitted(1.0, f"{100:018x}", "total", (f"{11:018x}",),
                                 (f"{101:018x}",), None))
    recs += [ev.TaskStarted(1.0, f"{0:018x}", "add", NODE, 11)]
    snap = _grouped(recs, 3).snapshot()
    assert snap["grouped"]
    nodes, edges = plots.graph_data(snap)
    assert nodes["name"] == ["add", "total"]
    assert nodes["state"] == ["running", "pending"]  # the most urgent state of each group
    assert "running 1" in nodes["detail"][0] and "pending 5" in nodes["detail"][0]
    assert nodes["size"][0] > nodes["size"][1]  # sized by task count
    assert len(edges["x0"]) == 1 and nodes["x"] == [0.0, 1.0]  # add -> total; no self edge


def test_summary_objects_and_waits_from_a_snapshot() -> None:
    snap = _diamond_model().snapshot()
    summary = liveview.summary_html(snap, "following the cluster")
    assert "following the cluster" in summary
    assert "4: 0 pending, 1 scheduled, 0 running, 2 finished" in summary  # d: arguments ready
    assert "1 failed" in summary
    table = liveview.objects_html(snap)
    assert table.index("a1") < table.index("b1")  # the largest first
    assert "4,096 B" in table and "inline" in table
    assert "the 1 largest of 2 objects" in liveview.objects_html(snap, max_rows=1)
    shown = liveview.waits_to_show(snap)
    assert [(w["id"], w["done"]) for w in shown] == [("7", False), ("8", True)]
    assert liveview.waits_to_show(snap, max_finished=0) == [shown[0]]
    assert shown[0]["ready"] == 2  # b1 and the failed c1 are ready, d1 is not


def test_grouped_object_table_shows_per_node_totals() -> None:
    m = _grouped([ev.ObjectCreated(1.0, f"{i:018x}", 100, NODE, "drv", None, False)
                  for i in range(3)], 1)
    html = liveview.objects_html(m.snapshot())
    assert "per node" in html and NODE in html and "<td>3</td>" in html


def test_timeline_columns_one_bar_per_execution_on_its_worker_row() -> None:
    runs = [Execution("t1", "f", NODE, 11, 10.0, 10.5, "finished"),
            Execution("t2", "g", NODE, 12, 10.2, 10.3, "failed", error_type="KeyError"),
            Execution("t3", "f", NODE, 11, 10.6, None)]  # running: drawn up to now
    cols, rows, origin = plots.timeline_data(runs, now=11.0)
    assert origin == 10.0 and rows == [plots.worker_row(NODE, 11), plots.worker_row(NODE, 12)]
    assert cols["left"] == [0.0, pytest.approx(0.2), pytest.approx(0.6)]
    assert cols["right"] == [0.5, pytest.approx(0.3), pytest.approx(1.0)]
    assert cols["color"] == [plots.COLORS["finished"], plots.COLORS["failed"],
                             plots.COLORS["running"]]
    assert cols["state"][1] == "failed (KeyError)" and cols["duration"][0] == "500.0 ms"
    cols, _, _ = plots.timeline_data(runs, now=11.0, max_bars=1)
    assert cols["task_id"] == ["t3"]  # only the most recent bars


# ---------------------------------------------------------------- in a real kernel
SHOW = """
import json, os, threading, time
import nbdist
from polling import until

@nbdist.remote
def inc(x):
    return x + 1

@nbdist.remote
def add(x, y):
    return x + y

@nbdist.remote
def gated(path):
    until(lambda: os.path.exists(path), timeout=60)
    return 0

view = nbdist.show()
"""

STATE = """
print("STATE", json.dumps({
    "summary": view.summary.value, "objects": view.objects.value,
    "bars": [[b.value, b.max, b.bar_style, b.description] for b in view.waits.children
             if hasattr(b, "max")],
    "graph": [o["data"]["text/html"] for o in view.graph.outputs],
    "timeline": [o["data"]["text/html"] for o in view.timeline.outputs],
    "running": view.running, "status": view.status,
    "threads": [t.name for t in threading.enumerate() if t.name == "nbdist-liveview"],
}))
"""


def _state(k: KernelSession) -> dict:
    out = k.ok(STATE)
    line = next(x for x in out.splitlines() if x.startswith("STATE "))
    return json.loads(line[len("STATE "):])


def _bar_states(k: KernelSession) -> list[dict]:
    """The state of every IntProgress widget the kernel sent to the frontend (opened, then
    updated by comm messages), as the frontend would hold it."""
    states: dict[str, dict] = {}
    for m in list(k.iopub):
        content = m["content"]
        if m["msg_type"] == "comm_open":
            state = content["data"].get("state", {})
            if state.get("_model_name") == "IntProgressModel":
                states[content["comm_id"]] = dict(state)
        elif m["msg_type"] == "comm_msg" and content["comm_id"] in states:
            states[content["comm_id"]].update(content["data"].get("state", {}))
    return list(states.values())


def test_show_displays_a_widget_that_follows_tasks_objects_and_waits(
        shared_kernel: KernelSession, tmp_path: Path) -> None:
    k = shared_kernel
    content, msg_id = k.execute(SHOW)
    assert content["status"] == "ok"
    try:
        _follow_tasks_objects_and_waits(k, msg_id, tmp_path)
    finally:
        k.ok("view.close()")


def _follow_tasks_objects_and_waits(k: KernelSession, msg_id: str, tmp_path: Path) -> None:
    shown = [m["content"]["data"] for m in k.messages_for(msg_id)
             if m["msg_type"] == "display_data"]
    (widget,) = [d[WIDGET_MIME] for d in shown if WIDGET_MIME in d]
    assert widget["model_id"] == k.ok("print(view.widget.model_id)").strip()
    assert any("application/vnd.bokehjs_load.v0+json" in d for d in shown)

    # A task held running: the view shows it running (it updates on its own thread).
    gate = tmp_path / "gate"
    k.ok(f"held = gated.remote({str(gate)!r})")
    k.wait_for(lambda: "1 running" in _state(k)["summary"], 30, "the view showing 1 running")

    # A wait blocked on it: while the cell waits, the frontend gets a bar at 1 / 2.
    waiting = k.submit("w_ready, _ = nbdist.wait([held, inc.remote(1)], num_returns=2, "
                       "timeout=60)")
    k.wait_for(lambda: any(b.get("description", "").startswith("wait #")
                           and b.get("value") == 1 and b.get("max") == 2
                           for b in _bar_states(k)),
               30, "a live 'wait' progress bar at 1 / 2")
    gate.touch()
    assert k.reply(waiting)["content"]["status"] == "ok"

    out = k.ok("""
a = inc.remote(1)
b = inc.remote(a)
c = add.remote(a, b)
big = nbdist.put(b"x" * 300_000)
assert nbdist.get(c) == 5
ids = [next(e.task_id for e in nbdist.events.recent()
            if isinstance(e, nbdist.events.TaskSubmitted) and r.hex() in e.returns)
       for r in (a, b, c)]
print("IDS", json.dumps(ids + [big.hex()]))
""")
    *task_ids, big = json.loads(out.split("IDS ", 1)[1])

    def settled() -> dict | None:
        s = _state(k)
        done = ("0 pending, 0 scheduled, 0 running" in s["summary"] and big in s["objects"]
                and s["graph"] and all(t in s["graph"][0] for t in task_ids)
                and s["timeline"] and all(t in s["timeline"][0] for t in task_ids))
        return s if done else None

    s = k.wait_for(settled, 30, "the view showing the finished tasks and the object")
    assert s["running"] and s["status"] == "following the cluster"
    assert re.search(r"<td>300,\d\d\d B</td>", s["objects"])  # the value, pickled
    (wait_bar,) = [b for b in s["bars"] if b[3].startswith("wait") and b[1] == 2]
    assert wait_bar[0] == 2 and wait_bar[2] == "success"  # done: 2 of 2 ready
    # The graph drawn: the three tasks, finished, and their three dependency edges.
    states, pairs = json.loads(k.ok(
        "nodes, edges = view.graph_columns\n"
        "print(json.dumps([dict(zip(nodes['id'], nodes['state'])),"
        " list(zip(edges['src'], edges['dst']))]))"))
    assert all(states[t] == "finished" for t in task_ids)
    ta, tb, tc = task_ids
    assert {(ta, tb), (ta, tc), (tb, tc)} <= {tuple(p) for p in pairs}


def test_close_stops_the_updates_and_leaves_no_thread(shared_kernel: KernelSession) -> None:
    k = shared_kernel
    k.ok("view = nbdist.show()\nsubs_open = len(nbdist.events.bus()._subs)")
    assert _state(k)["running"]
    k.ok("view.close()")
    s = _state(k)
    assert not s["running"] and s["threads"] == [] and s["status"] == "stopped"
    out = k.ok("""
before = view.summary.value
nbdist.get(inc.remote(41))
nbdist.events.bus().flush()
print(json.dumps([view.summary.value == before, view.widget.comm is None,
                  len(nbdist.events.bus()._subs) == subs_open - 1]))
""")
    assert json.loads(out) == [True, True, True]


def test_closing_the_widget_in_the_frontend_stops_the_view(shared_kernel: KernelSession) -> None:
    k = shared_kernel
    comm_id = k.ok("view = nbdist.show()\nprint(view.widget.model_id)").strip()
    client = k.client
    client.shell_channel.send(client.session.msg("comm_close", {"comm_id": comm_id,
                                                                "data": {}}))
    k.wait_for(lambda: not _state(k)["running"], 30, "the view stopping on comm_close")
    s = _state(k)
    assert s["threads"] == [] and "closed" in s["status"]


def test_stopping_the_cluster_stops_the_view(shared_kernel: KernelSession) -> None:
    k = shared_kernel
    k.ok("view = nbdist.show()")
    assert _state(k)["running"]
    try:
        k.ok("%nbdist stop")
        s = k.wait_for(lambda: (lambda s: s if not s["running"] else None)(_state(k)), 30,
                       "the view stopping with the cluster")
        assert s["threads"] == [] and s["status"] == "stopped: the cluster stopped"
        assert "stopped: the cluster stopped" in s["summary"]
    finally:
        k.ok("%nbdist start --num-cpus 2")

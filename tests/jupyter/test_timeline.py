"""``nbdist.timeline()``, ``%nbdist timeline [FILE]`` and the workers of ``%nbdist status`` in a
real kernel with a 2-CPU cluster (one kernel for the module; the last test restarts its cluster).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from kernel_session import KernelSession

pytestmark = pytest.mark.timeout(120)

EXEC_MIME = "application/vnd.bokehjs_exec.v0+json"
LOAD_MIME = "application/vnd.bokehjs_load.v0+json"

RUN_STEPS = """
import json, os, time
import nbdist
from polling import poll

@nbdist.remote
def step(i):
    time.sleep(0.02)
    if i == 2:
        raise ValueError("step 2 fails")
    return os.getpid()

def task_id_of(ref):
    return next(e.task_id for e in nbdist.events.recent()
                if isinstance(e, nbdist.events.TaskSubmitted) and ref.hex() in e.returns)

def executions_of(ids):
    return [e for e in nbdist.timeline() if e["ph"] == "X" and e["args"]["task_id"] in ids]

t_before = time.time()
refs = [step.remote(i) for i in range(6)]
ready, _ = nbdist.wait(refs, num_returns=6, timeout=60)
assert len(ready) == 6
pids = []
for r in refs:
    try:
        pids.append(nbdist.get(r))
    except ValueError:
        pids.append(None)
ids = [task_id_of(r) for r in refs]
# A task's records follow its result by a moment: wait for all six.
poll(lambda: len(executions_of(ids)) >= 6, timeout=30, what="the six tasks' records")
t_after = time.time()
print("RESULT", json.dumps({"pids": pids, "ids": ids, "t_before": t_before,
                            "t_after": t_after, "api": executions_of(ids)}))
"""


def _result(out: str) -> dict:
    line = next(x for x in out.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def _display_data(k: KernelSession, msg_id: str) -> list[dict]:
    return [m["content"] for m in k.messages_for(msg_id) if m["msg_type"] == "display_data"]


def _status_html(k: KernelSession) -> str:
    _, msg_id = k.execute("%nbdist status")
    (shown,) = _display_data(k, msg_id)
    return str(shown["data"]["text/html"])


def test_timeline_json_has_one_complete_event_per_task_and_bokeh_is_shown(
        shared_kernel: KernelSession, tmp_path: Path) -> None:
    k = shared_kernel
    res = _result(k.ok(RUN_STEPS))
    path = tmp_path / "trace.json"
    content, msg_id = k.execute(f"%nbdist timeline {path}")
    assert content["status"] == "ok"
    assert f"to {path}" in k.text_for(msg_id)

    data = json.loads(path.read_text())
    trace = data["traceEvents"]
    mine = [e for e in trace if e["ph"] == "X" and e["args"]["task_id"] in res["ids"]]
    assert sorted(e["args"]["task_id"] for e in mine) == sorted(res["ids"])  # one per task
    assert mine == res["api"]  # the file holds what nbdist.timeline() returns
    worker_rows = {e["tid"] for e in trace if e["ph"] == "M" and e["name"] == "thread_name"}
    by_id = {e["args"]["task_id"]: e for e in mine}
    for i, (tid, pid) in enumerate(zip(res["ids"], res["pids"], strict=True)):
        e = by_id[tid]
        assert e["name"] == "step" and e["cat"] == "task"
        # Times: inside the cell's run, at least the 20 ms each task sleeps.
        assert res["t_before"] * 1e6 <= e["ts"] <= e["ts"] + e["dur"] <= res["t_after"] * 1e6
        assert e["dur"] >= 0.02e6
        assert e["tid"] in worker_rows and e["pid"] == 1
        if i == 2:
            assert e["args"]["state"] == "failed" and e["cname"] == "terrible"
            assert e["args"]["error_type"] == "ValueError"
            assert "step 2 fails" in e["args"]["error"]
        else:
            assert e["args"]["state"] == "finished"
            assert e["tid"] == pid  # the worker process that ran it

    shown = _display_data(k, msg_id)
    assert any(LOAD_MIME in d["data"] for d in shown)  # BokehJS loaded into the page
    (plot,) = [d for d in shown if EXEC_MIME in d["data"]]
    script = plot["data"]["application/javascript"]
    for tid in res["ids"]:
        assert tid in script  # each bar (with its hover fields) is in the plot's data
    assert "@duration" in script and "nbdist timeline" in script


def test_status_shows_workers_busy_with_their_task_then_idle(
        shared_kernel: KernelSession, tmp_path: Path) -> None:
    k = shared_kernel
    gate = tmp_path / "gate"
    k.ok(f"""
import os
from polling import until
@nbdist.remote
def held_task(path):
    until(lambda: os.path.exists(path), timeout=60)
    return os.getpid()
held_ref = held_task.remote({str(gate)!r})
""")
    busy_html = k.wait_for(
        lambda: (lambda h: h if "busy: <code>held_task</code>" in h else None)(_status_html(k)),
        30, "%nbdist status showing a worker busy with held_task")
    assert "<th>workers</th>" in busy_html
    gate.touch()
    pid = int(k.ok("print(nbdist.get(held_ref))").strip())
    assert re.search(rf"pid {pid}: busy: <code>held_task</code>", busy_html)
    k.wait_for(lambda: f"pid {pid}: idle" in _status_html(k), 30,
               f"worker {pid} idle again in %nbdist status")


def test_a_new_cluster_starts_a_new_record(shared_kernel: KernelSession) -> None:
    k = shared_kernel
    out = k.ok("print(sum(1 for e in nbdist.timeline() if e['ph'] == 'X'))")
    assert int(out) >= 6  # the earlier tests' tasks
    k.ok("%nbdist stop")
    # After stop the record still holds the last cluster's executions.
    assert int(k.ok("print(sum(1 for e in nbdist.timeline() if e['ph'] == 'X'))")) >= 6
    k.ok("%nbdist start --num-cpus 2")
    out = k.ok("""
from polling import poll
@nbdist.remote
def fresh():
    return 1
nbdist.get(fresh.remote())
poll(lambda: any(e["ph"] == "X" for e in nbdist.timeline()), timeout=30,
     what="the execution of fresh in the new record")
print(json.dumps([e["name"] for e in nbdist.timeline() if e["ph"] == "X"]))
""")
    assert json.loads(out) == ["fresh"]

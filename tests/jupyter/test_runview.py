"""A library run's progress in a real kernel: a fit()-like cell drives two trial actors (named
``Trial(<id>)`` by their ``__repr__``) on the cluster and publishes their RunUpdate records
from the driver. Checked from the client side: the panel's comm carries the run (rows, curves,
the scheduler's stop mark), the cell shows one inline view whose table follows the trials, and
the trials' printed lines reach that cell grouped per trial, not in its text stream."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest
from kernel_session import KernelSession

from nbdist import events as ev
from nbdist.jupyter import runview
from nbdist.jupyter.model import SCHEMA_VERSION

pytestmark = pytest.mark.timeout(180)

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

FIT_LIKE = '''
import time
from nbdist import events

@nbdist.remote
class TrialRunner:
    def __init__(self):
        self.label = "Trial(idle)"

    def __repr__(self):
        return self.label

    def run(self, trial_id, steps):
        self.label = f"Trial({trial_id})"
        losses = []
        for i in range(steps):
            print(f"step {i} of {trial_id}")
            losses.append(1.0 / (i + 1))
        return losses

def publish(trial, status, iteration, loss=None, note=""):
    metrics = (("loss", loss),) if loss is not None else ()
    events.publish(events.RunUpdate(time.time(), "tune", "demo", trial, status, iteration,
                                    metrics, (("lr", "0.1"),), note))

trials = ["t_00000", "t_00001"]
for t in trials:
    publish(t, "PENDING", 0)
runners = [TrialRunner.remote() for _ in trials]
results = nbdist.get([r.run.remote(t, 3) for r, t in zip(runners, trials)])
for t, losses in zip(trials, results):
    for i, loss in enumerate(losses, 1):
        publish(t, "RUNNING", i, loss)
publish("t_00000", "TERMINATED", 3, results[0][-1])
publish("t_00001", "TERMINATED", 3, results[1][-1], "stopped by AsyncHyperBandScheduler")
'''


# ---------------------------------------------------------------- pure parts
def _update(member: str, iteration: int, loss: float, status: str = "RUNNING",
            note: str = "") -> ev.RunUpdate:
    return ev.RunUpdate(float(iteration), "tune", "s", member, status, iteration,
                        (("loss", loss),), (("lr", "0.1"),), note)


def test_one_view_per_run_in_the_cell_running_and_trial_lines_go_to_it() -> None:
    shown: list[tuple[str | None, Any]] = []
    views = runview.RunViews(lambda tag, widget: shown.append((tag, widget)), lambda: "cell-7")
    try:
        views.on_events([_update("t1", 1, 1.0), _update("t2", 1, 2.0)])
        views.on_events([_update("t1", 2, 0.5)])
        assert len(shown) == 1 and shown[0][0] == "cell-7"
        view = views.views["tune:s"]
        assert shown[0][1] is view.widget
        lines = [ev.Output(1.0, "a", "Trial(t1)", 11, "stdout", "hello from t1", "cell-7"),
                 ev.Output(1.0, "b", "TrainWorker(rank=1)", 12, "stdout", "epoch 1", "cell-7"),
                 ev.Output(1.0, "c", "f", 13, "stdout", "plain", "cell-7"),
                 ev.Output(1.0, "a", "Trial(t1)", 11, "stderr", "warned", "cell-7")]
        rest = views.take_output(lines)
        assert [(r.name, r.line) for r in rest] == [("rank 1", "epoch 1"), ("f", "plain")]
        assert len(shown) == 1  # the trial's lines went into the run's view, not a new widget
        outputs = view.outputs
        assert outputs is not None and outputs.widget in view.widget.children
        (out,) = outputs.widget.children
        assert "".join(o["text"] for o in out.outputs) == "hello from t1\n[stderr] warned\n"
        assert outputs.widget.get_title(0) == "Trial t1: 2 lines"
    finally:
        views.close()


def test_the_inline_figure_draws_a_curve_per_member_and_the_schedulers_stop() -> None:
    view = runview.RunView("tune:s")
    for i in (1, 2, 3):
        view.apply(_update("t1", i, 1.0 / i))
    view.apply(_update("t2", 1, 2.0))
    view.apply(_update("t2", 1, 2.0, "TERMINATED", "stopped by ASHA at iteration 1"))
    view.refresh(force=True)
    assert view.metric.value == "loss" and view.figure_updates == 1
    assert view.run is not None
    assert "stopped by ASHA at iteration 1" in runview.table_html(view.run)
    fig = runview.curves_figure(view.run, "loss")
    sources = {r.data_source.name: r.data_source.data for r in fig.renderers
               if str(r.data_source.name or "").startswith("run-curve:")}
    assert sources["run-curve:t1"]["y"] == [1.0, 0.5, 1 / 3]
    assert sources["run-curve:t2"]["x"] == [1]
    marks = [r for r in fig.renderers if getattr(r.glyph, "marker", None) == "x"]
    assert len(marks) == 1


# ---------------------------------------------------------------- in a real kernel
def _comm_data(kernel: KernelSession, comm_id: str | None = None) -> list[dict[str, Any]]:
    with kernel._lock:
        msgs = list(kernel.iopub)
    return [m["content"]["data"] for m in msgs if m["msg_type"] == "comm_msg"
            and (comm_id is None or m["content"]["comm_id"] == comm_id)]


def _panel_runs(kernel: KernelSession, comm_id: str) -> dict[str, Any]:
    """The members of run "tune:demo" as the panel folds the messages (rows replaced, points
    and marks appended)."""
    members: dict[str, Any] = {}
    for data in _comm_data(kernel, comm_id):
        run = (data.get("runs") or {}).get("tune:demo")
        for mid, m in (run or {}).get("members", {}).items():
            held = members.setdefault(mid, {"points": [], "marks": []})
            held["points"] += [p for p in m["curves"].get("loss", [])
                               if not held["points"] or p[0] > held["points"][-1][0]]
            held["marks"] += [k for k in m["marks"] if k not in held["marks"]]
            held["row"] = m
    return members


def _widget_text(kernel: KernelSession) -> str:
    """Every widget state the kernel sent, as text (values of HTML widgets, Output widgets'
    outputs, Accordion titles)."""
    with kernel._lock:
        msgs = list(kernel.iopub)
    parts = []
    for m in msgs:
        if m["msg_type"] in ("comm_open", "comm_msg"):
            parts.append(json.dumps(m["content"]["data"].get("state", {})))
        elif m["msg_type"] == "stream" and m["parent_header"].get("msg_type") != "execute_request":
            parts.append(m["content"]["text"])  # an Output widget's captured stream
    return "\n".join(parts)


def test_a_fit_like_run_reaches_the_panel_the_inline_view_and_groups_trial_output(
        kernel: KernelSession) -> None:
    comm_id = uuid.uuid4().hex
    kernel.client.shell_channel.send(kernel.client.session.msg("comm_open", {
        "comm_id": comm_id, "target_name": "nbdist", "data": {"schema": SCHEMA_VERSION}}))
    kernel.wait_for(lambda: _comm_data(kernel, comm_id), 30, "the panel's first snapshot")

    content, cell = kernel.execute(FIT_LIKE, timeout=120)
    assert content["status"] == "ok", content

    # The panel: both trials, their curves, the scheduler's stop marked on t_00001's curve.
    def panel_done() -> dict[str, Any] | None:
        members = _panel_runs(kernel, comm_id)
        done = all(m["row"]["status"] == "TERMINATED" for m in members.values())
        return members if len(members) == 2 and done else None
    members = kernel.wait_for(panel_done, 30, "both trials TERMINATED in the panel's messages")
    assert [p[1:] for p in members["t_00000"]["points"]] == [[1, 1.0], [2, 0.5], [3, 1 / 3]]
    assert members["t_00000"]["marks"] == []
    assert [m[2:] for m in members["t_00001"]["marks"]] == [
        ["stopped", "stopped by AsyncHyperBandScheduler"]]
    assert members["t_00001"]["row"]["config"] == {"lr": "0.1"}

    # The inline view: displayed once, in the cell that ran the search.
    with kernel._lock:
        classes = {m["content"]["comm_id"]: m["content"]["data"]["state"].get("_dom_classes")
                   for m in kernel.iopub if m["msg_type"] == "comm_open"}
    shown = [classes.get(m["content"]["data"][WIDGET_MIME]["model_id"])
             for m in kernel.messages_for(cell)
             if m["msg_type"] == "display_data" and WIDGET_MIME in m["content"]["data"]]
    # (the other widget a slow get() may show is its progress bar)
    assert [c for c in shown if c and "nbdist-run-view" in c] == [["nbdist-run-view"]], shown
    kernel.wait_for(lambda: "stopped by AsyncHyperBandScheduler" in _widget_text(kernel)
                    and "t_00001" in _widget_text(kernel), 30,
                    "the inline table showing t_00001 stopped by the scheduler")

    # Trials' output: grouped per trial in widgets, never in the cell's text stream.
    def all_lines() -> str | None:
        text = _widget_text(kernel)
        wanted = [f"step {i} of {t}" for i in range(3) for t in ("t_00000", "t_00001")]
        return text if all(w in text for w in wanted) else None
    text = kernel.wait_for(all_lines, 30, "every trial line in the per-trial output widgets")
    assert "Trial t_00000: 3 lines" in text and "Trial t_00001: 3 lines" in text
    assert "step 0 of" not in kernel.text_for(cell)


TRAIN = '''
from nbdist import train
from nbdist.train import DataParallelTrainer, ScalingConfig

def loop(config):
    rank = train.get_context().get_world_rank()
    for epoch in range(3):
        print(f"epoch {epoch} on rank {rank}")
        train.report({"loss": 1.0 / (epoch + 1 + rank)})

result = DataParallelTrainer(loop, scaling_config=ScalingConfig(num_workers=2)).fit()
'''


def test_a_training_runs_workers_print_under_their_rank_and_get_a_row_each(
        kernel: KernelSession) -> None:
    content, cell = kernel.execute(TRAIN, timeout=120)
    assert content["status"] == "ok", content
    def last_lines() -> str | None:
        text = kernel.text_for(cell)
        return text if "epoch 2 on rank 0" in text and "epoch 2 on rank 1" in text else None
    text = kernel.wait_for(last_lines, 30, "the workers' last lines in the cell")
    lines = [line for line in text.splitlines() if "epoch" in line]
    assert all(re.match(rf"\(rank {line[-1]} pid=\d+\) epoch \d on rank {line[-1]}$", line)
               for line in lines), lines
    assert len(lines) == 6
    kernel.wait_for(lambda: re.search(r"rank 0.*TERMINATED.*rank 1.*TERMINATED",
                                      _widget_text(kernel), re.S), 30,
                    "the inline table with both ranks TERMINATED")

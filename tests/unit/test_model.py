"""The panel's Model driven by hand-made event records: no kernel, no cluster, no threads."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from nbdist import events as ev
from nbdist.events import tally
from nbdist.jupyter.model import SCHEMA_VERSION, WORKER_SPANS, Model

NODE = "n1"


class Clock:
    """Event times that only move forward, so every record has a distinct, plausible time."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 0.001
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def submit(clock: Clock, tid: str, name: str = "f", deps: tuple[str, ...] = (),
           submitter: str | None = "cell-1", parent: str | None = None) -> ev.TaskSubmitted:
    return ev.TaskSubmitted(clock(), tid, name, deps, (f"{tid}.r",), parent, None, submitter)


def run(clock: Clock, tid: str, name: str = "f", pid: int = 11) -> list[ev.Event]:
    """Started, finished and the return object created, as the runtime publishes them."""
    return [ev.TaskStarted(clock(), tid, name, NODE, pid),
            ev.TaskFinished(clock(), tid, name, 0.001, NODE, pid),
            ev.ObjectCreated(clock(), f"{tid}.r", 8, NODE, "driver", tid, False)]


def test_task_states_and_times(clock: Clock) -> None:
    model = Model(clock=clock)
    model.apply([submit(clock, "t1"), submit(clock, "t2")])
    snap = model.snapshot()
    assert snap["schema"] == SCHEMA_VERSION and snap["type"] == "snapshot"
    # No arguments to wait for: ready for a worker at once.
    assert {t["state"] for t in snap["tasks"].values()} == {"scheduled"}
    model.apply([ev.TaskStarted(clock(), "t1", "f", NODE, 11)])
    assert model.snapshot()["tasks"]["t1"]["state"] == "running"
    assert model.snapshot()["workers"][f"{NODE}:11"]["task"] == "t1"
    assert model.snapshot()["nodes"][NODE]["running"] == 1
    model.apply(run(clock, "t1")[1:])
    model.apply([ev.TaskFailed(clock(), "t2", "f", "ValueError", "bad input", 0.0, 0)])
    tasks = model.snapshot()["tasks"]
    assert tasks["t1"]["state"] == "finished"
    assert tasks["t1"]["started"] <= tasks["t1"]["ended"]
    assert tasks["t2"]["state"] == "failed"
    assert (tasks["t2"]["error_type"], tasks["t2"]["error"]) == ("ValueError", "bad input")
    snap = model.snapshot()
    assert snap["totals"]["finished"] == 1 and snap["totals"]["failed"] == 1
    assert snap["nodes"][NODE]["running"] == 0
    assert snap["workers"][f"{NODE}:11"]["tasks_done"] == 1


def test_nodes_learnt_from_records_until_node_up_describes_them(clock: Clock) -> None:
    model = Model(clock=clock)
    model.apply([submit(clock, "t1"), ev.TaskStarted(clock(), "t1", "f", NODE, 11)])
    assert model.nodes_without_info() == [NODE]
    model.apply([ev.NodeUp(clock(), NODE, "unix:/tmp/node.sock", {"CPU": 4.0})])
    assert model.nodes_without_info() == []
    node = model.snapshot()["nodes"][NODE]
    assert (node["capacity"], node["running"], node["utilization"]) == (4.0, 1, 0.25)
    model.apply([ev.WorkerDown(clock(), NODE, 11, "killed"), ev.NodeDown(clock(), NODE, "gone")])
    snap = model.snapshot()
    assert snap["nodes"][NODE]["state"] == "down"
    assert snap["workers"][f"{NODE}:11"]["state"] == "down"


def test_actors_and_dropped_events(clock: Clock) -> None:
    model = Model(clock=clock)
    model.apply([ev.ActorCreated(clock(), "a1", "Counter", "counter"),
                 ev.ActorRestarted(clock(), "a1", 1), ev.ActorDied(clock(), "a1", "killed")])
    model.take_delta()
    model.apply([ev.EventsDropped(clock(), 7)])
    delta = model.take_delta()
    assert delta is not None and delta["totals"]["dropped_events"] == 7
    actor = model.snapshot()["actors"]["a1"]
    assert (actor["class_name"], actor["restarts"], actor["state"]) == ("Counter", 1, "dead")


def test_late_or_duplicate_records_do_not_move_a_task_backwards(clock: Clock) -> None:
    model = Model(clock=clock)
    sub = submit(clock, "t1")
    model.apply([sub, *run(clock, "t1"), sub, ev.TaskStarted(clock(), "t1", "f", NODE, 11)])
    snap = model.snapshot()
    assert snap["tasks"]["t1"]["state"] == "finished"
    assert snap["groups"]["g1"]["counts"] == {"pending": 0, "scheduled": 0, "running": 0,
                                               "finished": 1, "failed": 0}


def test_retry_sends_a_running_task_back_to_pending(clock: Clock) -> None:
    model = Model(clock=clock)
    model.apply([submit(clock, "t1"), ev.TaskStarted(clock(), "t1", "f", NODE, 11),
                 ev.TaskRetried(clock(), "t1", "f", 1, "worker died")])
    snap = model.snapshot()
    assert snap["tasks"]["t1"]["state"] == "pending" and snap["tasks"]["t1"]["attempt"] == 1
    assert snap["nodes"][NODE]["running"] == 0


def test_deps_resolve_to_producer_tasks_and_parents(clock: Clock) -> None:
    model = Model(clock=clock)
    put = ev.ObjectCreated(clock(), "p1", 100, NODE, "driver", None, False)
    model.apply([put, submit(clock, "a"), submit(clock, "b"),
                 submit(clock, "c", "g", deps=("a.r", "b.r", "p1")),
                 submit(clock, "d", "h", parent="c")])
    tasks = model.snapshot()["tasks"]
    assert tasks["c"]["deps"] == ["a.r", "b.r", "p1"]
    assert tasks["c"]["dep_tasks"] == ["a", "b"]  # a put has no producer task
    assert tasks["d"]["parent"] == "c"
    groups = {g["name"]: gid for gid, g in model.snapshot()["groups"].items()}
    assert model.snapshot()["group_edges"] == [[groups["f"], groups["g"], 2]]


def test_stdout_lines_are_bounded_per_task(clock: Clock) -> None:
    model = Model(clock=clock, max_output_lines=3)
    model.apply([submit(clock, "t1")])
    model.apply([ev.Output(clock(), "t1", "f", 11, "stdout", f"line {i}") for i in range(10)])
    model.apply([ev.Output(clock(), "t1", "f", 11, "stderr", "x" * 5000)])
    lines = model.snapshot()["tasks"]["t1"]["stdout"]
    assert lines[:2] == ["line 8", "line 9"]
    assert lines[2].startswith("[stderr] xxx") and len(lines[2]) < 600


def test_wait_progress_follows_objects_and_finished_waits_are_bounded(clock: Clock) -> None:
    model = Model(clock=clock, max_finished_waits=2)
    model.apply([submit(clock, f"t{i}") for i in range(4)])
    ids = tuple(f"t{i}.r" for i in range(4))
    model.apply([ev.WaitBegun(clock(), 1, "wait", ids, 2, 0, "cell-1")])
    model.apply(run(clock, "t0"))
    model.apply([ev.TaskFailed(clock(), "t1", "f", "KeyError", "k", 0.0, 11)])
    wait = model.snapshot()["waits"]["1"]
    assert (wait["ready"], wait["total"], wait["num_returns"], wait["done"]) == (2, 4, 2, False)
    model.apply([ev.WaitDone(clock(), 1, 2, 4, False)])
    assert model.snapshot()["waits"]["1"]["done"] is True
    model.apply([ev.WaitBegun(clock(), 2, "get", ids, 4, 2, None),
                 ev.WaitDone(clock(), 2, 2, 4, True)])
    assert model.snapshot()["waits"]["2"]["timed_out"] is True
    model.take_delta()
    model.apply([ev.WaitBegun(clock(), 3, "get", ids[:1], 1, 1, None),
                 ev.WaitDone(clock(), 3, 1, 1, False)])
    assert sorted(model.snapshot()["waits"]) == ["2", "3"]
    delta = model.take_delta()
    assert delta is not None and delta["waits_removed"] == ["1"]


def test_objects_and_freed_objects(clock: Clock) -> None:
    model = Model(clock=clock)
    model.apply([ev.ObjectCreated(clock(), "o1", 10, NODE, "driver", None, False),
                 ev.ObjectCreated(clock(), "o2", 5_000_000, NODE, "driver", None, True)])
    snap = model.snapshot()
    assert snap["objects"]["o2"]["in_shared_memory"] is True
    assert snap["objects"]["o2"]["locations"] == [NODE]
    assert snap["nodes"][NODE]["bytes"] == 5_000_010
    assert snap["nodes"][NODE]["shm_bytes"] == 5_000_000
    model.take_delta()
    model.apply([ev.ObjectFreed(clock(), "o2"), ev.ObjectFreed(clock(), "unknown")])
    delta = model.take_delta()
    assert delta is not None and delta["objects_removed"] == ["o2"]
    snap = model.snapshot()
    assert list(snap["objects"]) == ["o1"]
    assert snap["totals"]["objects_freed"] == 1 and snap["nodes"][NODE]["shm_bytes"] == 0


def test_delta_has_only_what_changed_and_none_when_nothing_did(clock: Clock) -> None:
    model = Model(clock=clock)
    model.apply([submit(clock, "t1"), submit(clock, "t2")])
    first = model.take_delta()
    assert first is not None and first["type"] == "delta" and first["schema"] == SCHEMA_VERSION
    assert set(first["tasks"]) == {"t1", "t2"}
    assert model.take_delta() is None
    model.apply(run(clock, "t2"))
    second = model.take_delta()
    assert second is not None and second["seq"] == first["seq"] + 1
    assert set(second["tasks"]) == {"t2"} and second["tasks"]["t2"]["state"] == "finished"
    assert set(second["objects"]) == {"t2.r"}


def hx(n: int) -> str:
    """An id as the engine writes it; a task's return ids follow its own."""
    return f"{n:018x}"


def hsubmit(clock: Clock, n: int, name: str = "f", deps: tuple[int, ...] = (),
            submitter: str | None = "cell-1") -> ev.TaskSubmitted:
    return ev.TaskSubmitted(clock(), hx(n), name, tuple(hx(d) for d in deps), (hx(n + 1),),
                            None, None, submitter)


def hrun(clock: Clock, n: int, name: str = "f", pid: int = 11) -> list[ev.Event]:
    return [ev.TaskStarted(clock(), hx(n), name, NODE, pid),
            ev.TaskFinished(clock(), hx(n), name, 0.001, NODE, pid),
            ev.ObjectCreated(clock(), hx(n + 1), 8, NODE, "driver", hx(n), False)]


class Fed:
    """A model and the engine's tally fed the same records; once the model is grouped it
    takes the tally's summary, as the comm bridge does."""

    def __init__(self, clock: Clock, **options: int) -> None:
        self.clock = clock
        self.model = Model(clock=clock, **options)
        self.tally = tally.Tally()

    def apply(self, batch: list[ev.Event]) -> None:
        self.model.apply(batch)
        self.tally.fold(batch)
        self.model.apply_summary(self.tally.snapshot(self.clock()))


def test_grouping_past_the_threshold(clock: Clock) -> None:
    fed = Fed(clock, group_threshold=10)
    fed.apply([hsubmit(clock, 10 * i, "f", submitter="c1") for i in range(6)])
    fed.apply([hsubmit(clock, 100 + 10 * i, "g", deps=(10 * i + 1,), submitter="c2")
               for i in range(6)])  # past the threshold
    fed.apply([ev.TaskFailed(clock(), hx(0), "f", "ValueError", "no", 0.0, 11,
                             submitter="c1")])
    fed.apply(hrun(clock, 10))
    switch = fed.model.take_delta()
    assert switch is not None and switch["type"] == "snapshot" and switch["grouped"]
    assert list(switch["tasks"]) == [hx(0)]  # only failed tasks stay individual
    assert switch["objects"] == {}
    counts = {g["name"]: (g["submitter"], g["counts"]) for g in switch["groups"].values()}
    # Worker 11 just ended an f and f's are scheduled: it runs the next (its start is
    # not told yet).
    assert counts["f"] == ("c1", {"pending": 0, "scheduled": 3, "running": 1, "finished": 1,
                                  "failed": 1})
    # The first g's argument holds the failed f's error, the second's is a result: ready.
    assert counts["g"] == ("c2", {"pending": 4, "scheduled": 2, "running": 0, "finished": 0,
                                  "failed": 0})
    assert [e[2] for e in switch["group_edges"]] == [6]
    fed.apply(hrun(clock, 110, "g"))
    delta = fed.model.take_delta()
    assert delta is not None and delta["type"] == "delta" and delta["tasks"] == {}
    # (f too changed: worker 11 is presumed to run a g now)
    assert {g["name"]: g["counts"]["finished"] for g in delta["groups"].values()}["g"] == 1
    assert delta["totals"]["finished"] == 2 and delta["totals"]["tasks"] == 12
    assert fed.model.take_delta() is None, "an unchanged summary is no change"


def stream(n: int, clock: Clock) -> Iterator[list[ev.Event]]:
    """A run of ``n`` tasks in 3 functions from 2 cells, in batches like the dispatcher's."""
    batch: list[ev.Event] = []
    names = ("load", "process", "reduce")
    for i in range(n):
        deps = (2 * i - 1,) if i else ()
        batch.append(hsubmit(clock, 2 * i, names[i % 3], deps=deps, submitter=f"cell-{i % 2}"))
        if i >= 2:
            batch.extend(hrun(clock, 2 * (i - 2), names[(i - 2) % 3], pid=10 + i % 2))
            if i >= 3:
                batch.append(ev.ObjectFreed(clock(), hx(2 * (i - 3) + 1)))
        if len(batch) >= 2_000:
            yield batch
            batch = []
    yield batch


@pytest.mark.timeout(60)
def test_messages_of_a_100k_task_run_stay_small(clock: Clock) -> None:
    fed = Fed(clock)
    sizes = []
    for batch in stream(100_000, clock):
        fed.apply(batch)
        delta = fed.model.take_delta()
        assert delta is not None
        sizes.append(len(json.dumps(delta)))
    assert fed.model.grouped
    assert max(sizes[-20:]) < 50_000, sizes[-20:]
    assert len(json.dumps(fed.model.snapshot())) < 50_000
    totals = fed.model.snapshot()["totals"]
    assert totals["tasks"] == 100_000 and totals["finished"] == 99_998
    assert (totals["objects"], totals["objects_freed"]) == (1, 99_997)
    workers = fed.model.snapshot()["workers"]
    assert sum(w["tasks_done"] for w in workers.values()) == 99_998
    assert all(len(w["spans"]) == WORKER_SPANS for w in workers.values())


def test_workers_carry_their_last_task_spans_for_the_timeline(clock: Clock) -> None:
    model = Model(clock=clock)
    for i in range(WORKER_SPANS + 5):
        model.apply([submit(clock, f"t{i}"), *run(clock, f"t{i}")])
    model.apply([submit(clock, "bad"), ev.TaskStarted(clock(), "bad", "f", NODE, 11),
                 ev.TaskFailed(clock(), "bad", "f", "ValueError", "no", 0.002, 11)])
    spans = model.snapshot()["workers"][f"{NODE}:11"]["spans"]
    assert len(spans) == WORKER_SPANS
    assert [s[0] for s in spans[-2:]] == [f"t{WORKER_SPANS + 4}", "bad"]
    task_id, name, started, ended, failed = spans[-1]
    assert (name, failed) == ("f", True) and started <= ended
    assert spans[0][4] is False
    delta = model.take_delta()
    assert delta is not None and delta["workers"][f"{NODE}:11"]["spans"] == spans


def test_the_cluster_flag_is_sent_when_it_changes(clock: Clock) -> None:
    model = Model(clock=clock)
    assert model.snapshot()["cluster"] is False
    model.set_cluster(False)
    assert model.take_delta() is None
    model.set_cluster(True)
    delta = model.take_delta()
    assert delta is not None and delta["cluster"] is True
    assert model.take_delta() is None
    assert model.snapshot()["cluster"] is True


def test_tasks_wait_pending_for_arguments_then_are_scheduled(clock: Clock) -> None:
    model = Model(clock=clock)
    model.apply([submit(clock, "a"), submit(clock, "b", deps=("a.r",)),
                 submit(clock, "c", deps=("a.r", "b.r"))])
    states = {t: v["state"] for t, v in model.snapshot()["tasks"].items()}
    assert states == {"a": "scheduled", "b": "pending", "c": "pending"}
    model.apply(run(clock, "a"))
    states = {t: v["state"] for t, v in model.snapshot()["tasks"].items()}
    assert states == {"a": "finished", "b": "scheduled", "c": "pending"}
    model.apply([ev.TaskFailed(clock(), "b", "f", "ValueError", "bad", 0.01, 11, 1.0,
                               "Traceback (most recent call last):\n  line 3\nValueError: bad")])
    snap = model.snapshot()
    assert snap["tasks"]["c"]["state"] == "scheduled"  # an error is a ready argument too
    assert "line 3" in snap["tasks"]["b"]["error"] and snap["tasks"]["b"]["started"] == 1.0


def test_objects_show_driver_refs_pinned_and_spilled(clock: Clock) -> None:
    model = Model(clock=clock)
    model.ref_counts = lambda ids: {"p1": 2}
    model.apply([ev.ObjectCreated(clock(), "p1", 4096, NODE, "driver", None, True),
                 submit(clock, "t", deps=("p1",))])
    delta = model.take_delta()
    assert delta is not None
    obj = delta["objects"]["p1"]
    assert (obj["refs"], obj["pinned"], obj["spilled"]) == (2, True, False)
    model.apply([ev.ObjectSpilled(clock(), "p1", 4096, NODE), *run(clock, "t")])
    delta = model.take_delta()
    assert delta is not None
    obj = delta["objects"]["p1"]
    assert (obj["pinned"], obj["spilled"], obj["state"]) == (False, True, "spilled")
    model.ref_counts = lambda ids: dict.fromkeys(ids, 0)
    model.apply([ev.ObjectRestored(clock(), "p1", 4096, NODE),
                 ev.ObjectPinned(clock(), "p1", 4096, NODE)])
    delta = model.take_delta()
    assert delta is not None
    obj = delta["objects"]["p1"]
    assert (obj["refs"], obj["pinned"], obj["spilled"], obj["state"]) == (0, True, False,
                                                                            "live")


def test_overlapping_waits_both_follow_the_objects_they_share(clock: Clock) -> None:
    model = Model(clock=clock)
    model.apply([submit(clock, f"t{i}") for i in range(3)])
    model.apply([ev.WaitBegun(clock(), 1, "get", ("t0.r", "t1.r"), 2, 0, None),
                 ev.WaitBegun(clock(), 2, "wait", ("t1.r", "t2.r"), 2, 0, None)])
    model.apply(run(clock, "t1"))  # in both waits: the first completes nothing yet
    model.apply(run(clock, "t0"))  # completes wait 1
    model.apply(run(clock, "t2"))  # completes wait 2, after wait 1 left the open ones
    waits = model.snapshot()["waits"]
    assert (waits["1"]["ready"], waits["2"]["ready"]) == (2, 2)


def test_store_totals_stay_right_across_the_switch_to_groups(clock: Clock) -> None:
    fed = Fed(clock, group_threshold=10)
    fed.apply([ev.ObjectCreated(clock(), hx(1000 + i), 100, NODE, "driver", None, i % 2 == 0)
               for i in range(8)])  # before grouping: listed one by one
    fed.apply([hsubmit(clock, 10 * i) for i in range(12)])  # past the threshold
    assert fed.model.grouped
    fed.apply([ev.ObjectCreated(clock(), hx(2000 + i), 10, NODE, "driver", None, False)
               for i in range(5)])
    fed.apply([ev.ObjectFreed(clock(), hx(oid)) for oid in (1000, 1001, 2000, 1000, 3000)])
    node = fed.model.snapshot()["nodes"][NODE]
    assert (node["objects"], node["bytes"], node["shm_bytes"]) == (10, 640, 300)
    totals = fed.model.snapshot()["totals"]
    assert (totals["objects"], totals["bytes"], totals["objects_freed"]) == (10, 640, 3)
    # An argument already in the store is ready, whichever side of the switch it came from.
    fed.apply([hsubmit(clock, 500, deps=(1002,)), hsubmit(clock, 510, deps=(2001,)),
               hsubmit(clock, 520, deps=(1000,))])
    counts = [g for g in fed.model.snapshot()["groups"].values()][0]["counts"]
    assert (counts["scheduled"], counts["pending"]) == (14, 1)


def test_a_grouped_wait_starts_at_the_engines_count_and_follows_its_progress(
        clock: Clock) -> None:
    fed = Fed(clock, group_threshold=10)
    fed.apply([hsubmit(clock, 10 * i) for i in range(12)])  # grouped: objects not followed
    ids = tuple(hx(10 * i + 1) for i in range(10))
    fed.apply([ev.WaitBegun(clock(), 1, "get", ids, 10, 0, "c1")])
    wait = fed.model.snapshot()["waits"]["1"]
    assert (wait["ready"], wait["total"], wait["done"]) == (0, 10, False)
    fed.apply([ev.WaitProgress(clock(), 1, 6, 10)])
    assert fed.model.snapshot()["waits"]["1"]["ready"] == 6
    fed.apply([ev.WaitDone(clock(), 1, 10, 10, False)])
    wait = fed.model.snapshot()["waits"]["1"]
    assert (wait["ready"], wait["done"]) == (10, True)


def test_a_wait_for_the_same_ref_twice_counts_it_twice(clock: Clock) -> None:
    model = Model(clock=clock)
    model.apply([submit(clock, "t0"), submit(clock, "t1")])
    model.apply([ev.WaitBegun(clock(), 1, "get", ("t0.r", "t0.r", "t1.r"), 3, 0, "c1")])
    assert model.snapshot()["waits"]["1"]["ready"] == 0
    model.apply(run(clock, "t0"))
    assert model.snapshot()["waits"]["1"]["ready"] == 2
    model.apply(run(clock, "t1"))
    assert model.snapshot()["waits"]["1"]["ready"] == 3


@pytest.mark.parametrize("threshold", [2_000, 3])
def test_a_stopped_cluster_leaves_no_actor_alive_and_no_worker_busy(
        clock: Clock, threshold: int) -> None:
    fed = Fed(clock, group_threshold=threshold)
    fed.model.set_cluster(True)
    fed.apply([ev.NodeUp(clock(), NODE, "127.0.0.1:1", {"CPU": 2.0}),
               ev.WorkerUp(clock(), NODE, 11), ev.ActorCreated(clock(), "a1", "Counter", None)])
    fed.apply([hsubmit(clock, 10 * i) for i in range(5)])
    fed.apply([ev.TaskStarted(clock(), hx(0), "f", NODE, 11)])
    assert fed.model.grouped == (threshold == 3)
    fed.model.take_delta()
    fed.model.set_cluster(False)
    fed.apply([])  # grouped: the summary still has the task running when the cluster went
    delta = fed.model.take_delta()
    assert delta is not None and delta["cluster"] is False
    assert delta["actors"]["a1"]["state"] == "dead"
    snap = fed.model.snapshot()
    assert [(w["state"], w["task_name"]) for w in snap["workers"].values()] == [("down", None)]
    assert [(n["state"], n["running"]) for n in snap["nodes"].values()] == [("down", 0)]


def test_library_marks_reach_the_panel_before_and_after_grouping(clock: Clock) -> None:
    poll = ("tune", "search", "t1", "control")
    work = ("tune", "search", "t1", "work")
    fed = Fed(clock, group_threshold=6)

    def marked(n: int, name: str, mark: tuple[str, str, str, str] | None) -> ev.TaskSubmitted:
        return ev.TaskSubmitted(clock(), hx(n), name, (), (hx(n + 1),), None, None, "c1", mark)

    fed.apply([marked(0, "TrialActor.run", work), marked(10, "TrialActor.poll", poll),
               marked(20, "mine", None)])
    snap = fed.model.snapshot()
    tasks = {t["name"]: t for t in snap["tasks"].values()}
    assert tasks["TrialActor.run"]["library_call"] == {
        "library": "tune", "run": "search", "member": "t1", "role": "work"}
    assert tasks["TrialActor.poll"]["library_call"]["role"] == "control"
    assert "library_call" not in tasks["mine"]  # the user's own call: no mark sent
    groups = {g["name"]: g for g in snap["groups"].values()}
    assert groups["TrialActor.poll"]["library_call"]["role"] == "control"
    assert "library_call" not in groups["mine"]
    # Grouped, a group's mark comes from the engine's summary (the tally keeps it).
    fed.apply([marked(100 + 10 * i, "TrialActor.poll", poll) for i in range(4)]
              + [marked(200, "bundle_reservation_check", ("placement_group", "", "", "control"))])
    switch = fed.model.take_delta()
    assert switch is not None and switch["grouped"]
    groups = {g["name"]: g for g in switch["groups"].values()}
    assert groups["bundle_reservation_check"]["library_call"]["library"] == "placement_group"
    assert groups["TrialActor.poll"]["total"] == 5
    summary = fed.tally.snapshot(clock())
    names = [g[0] for g in summary.groups]
    assert {names[i]: mark[3] for i, mark in summary.marks} == {
        "TrialActor.run": "work", "TrialActor.poll": "control",
        "bundle_reservation_check": "control"}


def test_a_librarys_waits_are_marked_and_never_push_the_users_out(clock: Clock) -> None:
    model = Model(clock=clock, max_finished_waits=2)
    mark = ("tune", "search", "", "control")

    def wait(n: int, library_call: tuple[str, str, str, str] | None) -> list[ev.Event]:
        return [ev.WaitBegun(clock(), n, "wait", (hx(n),), 1, 0, "c1", library_call),
                ev.WaitDone(clock(), n, 1, 1, False)]

    model.apply(wait(1, None) + wait(2, None))
    for n in range(10, 15):  # a controller's polls
        model.apply(wait(n, mark))
    waits = model.snapshot()["waits"]
    assert {w["id"] for w in waits.values() if "library_call" not in w} == {"1", "2"}
    assert [w["library_call"]["library"] for w in waits.values() if "library_call" in w] == [
        "tune", "tune"]

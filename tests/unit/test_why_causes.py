"""`nbdist.util.why.explain` on hand-made event records (no cluster): each cause of a wait
the issue names is found and said, down the chain of arguments."""

from __future__ import annotations

from typing import Any

from nbdist import events as ev
from nbdist.util.why import Cluster, explain


def cluster(free: float = 0.0, groups: dict[str, Any] | None = None) -> Cluster:
    return Cluster(lambda: {"CPU": free}, lambda: {"CPU": 2.0}, lambda: groups or {})


def submitted(tid: str, name: str, deps: tuple[str, ...] = (), actor: str | None = None,
              library: tuple[str, str, str, str] | None = None) -> ev.TaskSubmitted:
    return ev.TaskSubmitted(1.0, tid, name, deps, (f"{tid}.r",), None, actor, "cell",
                            library)


def get(*oids: str, wait_id: int = 1) -> ev.WaitBegun:
    return ev.WaitBegun(2.0, wait_id, "get", oids, len(oids), 0)


def test_a_dependency_on_a_dead_actor() -> None:
    records = [ev.ActorCreated(0.5, "actor1", "Counter", ""),
               submitted("t1", "Counter.add", actor="actor1"),
               submitted("t2", "total", deps=("t1.r",)), get("t2.r"),
               ev.ActorDied(1.5, "actor1", "killed by nbdist.kill")]
    text = explain(records, None, cluster())
    assert "'total' (t2): waits for its argument(s):" in text
    assert "'Counter.add' (t1): its actor Counter (actor1) died: killed by nbdist.kill" in text
    # Once the call failed for it, the failure says so too.
    records.append(ev.TaskFailed(1.6, "t1", "Counter.add", "ActorDiedError",
                                 "The actor died\nmore", 0.0, 0))
    text = explain(records, None, cluster())
    assert ("'Counter.add' (t1): failed with ActorDiedError: The actor died (the get raises "
            "it); its actor Counter (actor1) died: killed by nbdist.kill") in text


def test_an_actor_restarting_holds_its_call() -> None:
    records = [ev.ActorCreated(0.5, "actor1", "Counter", ""),
               submitted("t1", "Counter.add", actor="actor1"), get("t1.r"),
               ev.ActorRestarted(1.5, "actor1", 1)]
    text = explain(records, None, cluster())
    assert "its actor Counter (actor1) is restarting (restart 1)" in text


def test_an_object_restored_from_spill() -> None:
    records = [submitted("t1", "load"), ev.TaskStarted(1.1, "t1", "load", "node1", 7),
               ev.TaskFinished(1.2, "t1", "load", 0.1, "node1", 7),
               ev.ObjectSpilled(1.3, "t1.r", 50_000_000, "node1"),
               ev.ObjectSpilled(1.3, "put1", 2_000_000, "node1"), get("t1.r", "put1")]
    text = explain(records, None, cluster())
    assert ("'load' (t1): done, but its value (50.0 MB) is spilled to disk on node node1: "
            "being restored into memory for the get") in text
    assert "put: done, but its value (2.0 MB) is spilled" in text
    records.append(ev.ObjectRestored(1.4, "t1.r", 50_000_000, "node1"))
    assert "'load'" not in explain(records, None, cluster())


def test_a_placement_group_not_placed_yet() -> None:
    groups = {"pg1": {"state": "PENDING", "name": "trainers", "strategy": "STRICT_SPREAD",
                      "bundles": {0: {"CPU": 4.0}}},
              "pg2": {"state": "CREATED", "name": "", "bundles": {0: {"CPU": 1.0}}}}
    records = [submitted("t1", "bundle_reservation_check",
                         library=("placement_group", "", "", "setup")), get("t1.r"),
               submitted("t2", "train"), get("t2.r", wait_id=2)]
    text = explain(records, 1, cluster(groups=groups))
    assert ("'bundle_reservation_check' (t1): a placement group's ready(): the group is not "
            "placed yet (trainers PENDING, bundles [{'CPU': 4.0}] STRICT_SPREAD)") in text
    assert "CPU 0/2" in text and "pg2" not in text
    text = explain(records, 2, cluster(free=0.0, groups=groups))
    assert "'train' (t2): pending for" in text
    assert "placement group(s) not placed yet: trainers PENDING" in text


def test_step_through_mode_holding_it() -> None:
    records = [submitted("t1", "leaf"), submitted("t2", "root", deps=("t1.r",)),
               ev.StepMode(1.1, True, 0), ev.TaskHeld(1.2, "t1", "leaf"), get("t2.r")]
    text = explain(records, None, cluster(free=2.0))
    assert "'root' (t2): waits for its argument(s):" in text
    assert "'leaf' (t1): held by step-through mode (%nbdist step releases it" in text


def test_an_unknown_wait_is_said_to_be_gone() -> None:
    records = [submitted("t1", "leaf"), get("t1.r")]
    assert "not in the event history" in explain(records, 99, cluster())


def test_the_newest_wait_of_the_user_is_explained() -> None:
    # An older get that never ended (its end not recorded) and a library's newer wait do not
    # take the place of the user's last get.
    records = [submitted("t1", "old"), get("t1.r", wait_id=1),
               submitted("t2", "new"), get("t2.r", wait_id=2),
               ev.WaitDone(3.0, 2, 0, 1, True),
               submitted("t3", "poll", library=("tune", "run", "", "poll")),
               ev.WaitBegun(3.5, 3, "wait", ("t3.r",), 1, 0, None,
                            ("tune", "run", "", "poll"))]
    text = explain(records, None, cluster(free=2.0))
    assert "The last get()" in text and "'new' (t2)" in text and "'old'" not in text

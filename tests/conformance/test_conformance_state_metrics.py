"""``nbdist.util.state`` (Ray's state API) and ``nbdist.util.metrics`` (Ray's application
metrics) on both backends, written as Ray's documentation writes them."""

from __future__ import annotations

import pytest
from polling import poll

import nbdist as ray
from nbdist.util import metrics, state

pytestmark = pytest.mark.timeout(180)


@ray.remote
def state_probe(x):
    return x


@ray.remote
def state_boom():
    raise KeyError("boom")


@ray.remote
class StateActor:
    def ping(self):
        return "pong"


def _task_rows(name):
    return [t for t in state.list_tasks(limit=10_000) if t.name == name]


def test_list_tasks_filters_and_summary(backend: str) -> None:
    ray.get([state_probe.remote(i) for i in range(3)])
    with pytest.raises(KeyError):
        ray.get(state_boom.remote())
    poll(lambda: len([t for t in _task_rows("state_probe") if t.state == "FINISHED"]) >= 3
         and [t for t in _task_rows("state_boom") if t.state == "FAILED"], timeout=60,
         what="the tasks' ends in list_tasks")
    failed = state.list_tasks(filters=[("name", "=", "state_boom"), ("state", "=", "failed")])
    assert failed and failed[0]["error_type"] and failed[0].type == "NORMAL_TASK"
    assert state.get_task(failed[0].task_id).name == "state_boom"
    assert not [t for t in state.list_tasks(filters=[("name", "=", "state_probe"),
                                                     ("state", "!=", "FINISHED")])]
    assert len(state.list_tasks(limit=1)) == 1
    summary = state.summarize_tasks()["cluster"]["summary"]
    assert summary["state_probe"]["state_counts"]["FINISHED"] >= 3
    assert summary["state_boom"]["type"] == "NORMAL_TASK"
    with pytest.raises(ValueError, match="no column"):
        state.list_tasks(filters=[("colour", "=", "red")])


def test_list_actors_nodes_workers_objects(backend: str) -> None:
    actor = StateActor.options(name="state_actor").remote()
    assert ray.get(actor.ping.remote()) == "pong"
    alive = poll(lambda: state.list_actors(filters=[("name", "=", "state_actor")]),
                 timeout=60, what="the actor in list_actors")
    assert alive[0].class_name == "StateActor" and alive[0].state == "ALIVE"
    assert state.get_actor(alive[0].actor_id).name == "state_actor"
    ray.kill(actor)
    poll(lambda: state.get_actor(alive[0].actor_id).state == "DEAD", timeout=60,
         what="the killed actor DEAD in list_actors")
    nodes = state.list_nodes()
    assert len(nodes) == 1 and nodes[0].state == "ALIVE"
    assert nodes[0].resources_total["CPU"] == 2
    assert poll(lambda: state.list_workers(filters=[("is_alive", "=", True)]), timeout=60)
    ref = ray.put(b"x" * 300_000)
    found = poll(lambda: [o for o in state.list_objects(limit=10_000)
                          if o.object_id == ref.hex()], timeout=60, what="the put object")
    assert found[0].object_size >= 300_000


@ray.remote
def record_metrics(i):
    from nbdist.util.metrics import Counter, Gauge, Histogram

    Counter("conf_calls", "calls", tag_keys=("kind",)).set_default_tags(
        {"kind": "task"}).inc()
    Histogram("conf_sizes", "sizes", boundaries=[1.0, 10.0]).observe(i)
    Gauge("conf_last", "last", tag_keys=("worker",)).set(i, tags={"worker": "w"})
    return i


def test_metrics_recorded_in_tasks_are_aggregated_in_the_driver(backend: str) -> None:
    ray.get([record_metrics.remote(i) for i in (0, 5, 50)])

    def rows():
        return {r["name"]: r for r in metrics.snapshot() if r["name"].startswith("conf_")}

    got = poll(lambda: (r := rows()).get("conf_calls", {}).get("value") == 3 and
               r.get("conf_sizes", {}).get("count") == 3 and r, timeout=60,
               what="three calls in the metrics snapshot")
    assert got["conf_calls"]["tags"] == {"kind": "task"}
    assert got["conf_calls"]["kind"] == "counter"
    assert got["conf_sizes"]["buckets"] == [1, 1, 1] and got["conf_sizes"]["sum"] == 55
    assert got["conf_last"]["tags"] == {"worker": "w"}
    assert got["conf_last"]["value"] in (0, 5, 50)


def test_metric_misuse_fails_as_in_ray(backend: str) -> None:
    counter = metrics.Counter("conf_checked", tag_keys=("a",))
    with pytest.raises(ValueError, match="Missing value for tag key"):
        counter.inc()
    with pytest.raises(ValueError, match="value must be >0"):
        counter.inc(0, tags={"a": "x"})
    with pytest.raises(TypeError, match="tag_keys"):
        metrics.Gauge("conf_bad", tag_keys=["a"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Unrecognized tag key"):
        counter.set_default_tags({"b": "x"})
    with pytest.raises(ValueError, match="boundaries"):
        metrics.Histogram("conf_hist")

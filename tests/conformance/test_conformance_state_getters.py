"""``nbdist.util.state``'s getters and summaries (get_node, get_worker, get_objects,
get_placement_group, list_placement_groups, summarize_actors, summarize_objects) and
``nbdist.util.list_named_actors``, on both backends, in the shapes of Ray's."""

from __future__ import annotations

import pytest
from polling import poll

import nbdist as ray
from nbdist.util import state

pytestmark = pytest.mark.timeout(180)


@ray.remote
class Summed:
    def ping(self):
        return "pong"


@ray.remote
def make_bytes(n):
    return b"y" * n


def test_get_node_and_get_worker(backend: str) -> None:
    node = state.list_nodes()[0]
    assert state.get_node(node.node_id) == node and state.get_node(node["node_id"]).is_head_node
    assert state.get_node("no-such-node") is None
    ray.get(make_bytes.remote(1))  # a worker is seen once it ran something
    worker = poll(lambda: state.list_workers(filters=[("is_alive", "=", True)]), timeout=60,
                  what="a live worker")[0]
    assert state.get_worker(worker.worker_id).pid == worker.pid
    assert state.get_worker("no-such-worker") is None


def test_get_objects_until_freed(backend: str) -> None:
    ref = ray.put(b"x" * 400_000)
    key = ref.hex()
    rows = poll(lambda: state.get_objects(key), timeout=60, what="the put object")
    assert len(rows) == 1 and rows[0].object_id == key
    assert rows[0].object_size >= 400_000
    assert state.get_objects("00" * 14) == []
    del ref
    if backend == "nbdist":  # the Ray backend reports puts, not frees (docs/ray-compatibility.md)
        poll(lambda: state.get_objects(key) == [], timeout=60, what="the freed object gone")


def test_placement_groups_listed_and_got(backend: str) -> None:
    pg = ray.util.placement_group([{"CPU": 1}], name="state_pg", strategy="PACK")
    ray.get(pg.ready(), timeout=120)
    pg_id = pg.id.hex()
    try:
        row = state.get_placement_group(pg_id)
        assert row is not None and row.name == "state_pg" and row.state == "CREATED"
        assert [b["unit_resources"] for b in row.bundles] == [{"CPU": 1}]
        assert [g.placement_group_id for g in
                state.list_placement_groups(filters=[("name", "=", "state_pg")])] == [pg_id]
        assert state.list_placement_groups(detail=False)[0].bundles is None
    finally:
        ray.util.remove_placement_group(pg)
    poll(lambda: state.get_placement_group(pg_id).state == "REMOVED", timeout=60,
         what="the removed group REMOVED")
    assert state.get_placement_group("ffff0000") is None


def test_summarize_actors_by_class_and_state(backend: str) -> None:
    actors = [Summed.remote() for _ in range(2)]
    ray.get([a.ping.remote() for a in actors])

    def summed():
        return state.summarize_actors()["cluster"]["summary"].get("Summed", {})

    poll(lambda: summed().get("state_counts", {}).get("ALIVE", 0) >= 2, timeout=60,
         what="two live Summed actors in summarize_actors")
    cluster = state.summarize_actors()["cluster"]
    assert cluster["summary_by"] == "class" and summed()["class_name"] == "Summed"
    assert cluster["total_actors"] >= 2
    ray.kill(actors[0])
    poll(lambda: summed()["state_counts"].get("DEAD", 0) >= 1, timeout=60,
         what="the killed actor DEAD in summarize_actors")


def test_summarize_objects_counts_live_objects(backend: str) -> None:
    refs = [ray.put(b"z" * 2_000_000), ray.put(b"w" * 1_000_000)]
    made = make_bytes.remote(1_000_000)
    ray.get(made)

    def summary():
        return state.summarize_objects()["cluster"]

    cluster = poll(lambda: summary() if summary()["total_objects"] >= 2 else None, timeout=60,
                   what="both objects in summarize_objects")
    entry = cluster["summary"]["disabled"]
    assert cluster["callsite_enabled"] is False and cluster["summary_by"] == "callsite"
    assert cluster["total_size_mb"] >= 2.5 and entry["total_objects"] == cluster["total_objects"]
    assert entry["task_state_counts"].get("NIL", 0) >= 2  # the puts
    if backend == "nbdist":  # the Ray backend reports puts only (docs/ray-compatibility.md)
        assert entry["task_state_counts"].get("FINISHED", 0) >= 1  # made by a finished task
    assert entry["total_num_nodes"] == 1
    del refs, made


def test_list_named_actors_of_this_namespace_or_all(backend: str) -> None:
    here = Summed.options(name="named_here").remote()
    there = Summed.options(name="named_there", namespace="elsewhere").remote()
    ray.get([here.ping.remote(), there.ping.remote()])
    names = ray.util.list_named_actors()
    assert "named_here" in names and "named_there" not in names
    everywhere = ray.util.list_named_actors(all_namespaces=True)
    namespace = ray.get_runtime_context().namespace
    assert {"name": "named_here", "namespace": namespace} in everywhere
    assert {"name": "named_there", "namespace": "elsewhere"} in everywhere
    ray.kill(here)
    ray.kill(there)
    poll(lambda: not {"named_here", "named_there"} & {
        e["name"] for e in ray.util.list_named_actors(all_namespaces=True)}, timeout=60,
        what="killed actors gone from list_named_actors")

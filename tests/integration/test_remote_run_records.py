"""Run records published by a worker on another node reach the driver: a dataset executed in a
task that runs on a second node shows its operator in the driver's event history, marked with
that task (the worker's node relays them to the driver's node)."""

from __future__ import annotations

import json

import pytest
from clusters import Cli

pytestmark = [pytest.mark.timeout(180), pytest.mark.nbdist_only]


def test_a_dataset_executed_on_another_node_shows_in_the_driver(cli: Cli) -> None:
    done = cli.python("""
        import json
        import time
        import nbdist as ray
        from nbdist import data as rd
        from nbdist.cluster_utils import Cluster
        from nbdist.ids import hex_id

        cluster = Cluster(initialize_head=True, connect=True, head_node_args={"num_cpus": 1})
        far = cluster.add_node(num_cpus=2, resources={"far": 1})
        cluster.wait_for_nodes()
        try:
            def slow(batch):
                time.sleep(0.3)  # deliberate sleep: a block's work, so the run lasts over 1 s
                return {"id": batch["id"] + 1}

            @ray.remote(num_cpus=0, resources={"far": 1})
            def execute(n):
                rd.DataContext.get_current().enable_progress_bars = False
                ds = rd.range(n, override_num_blocks=8).map_batches(slow)
                rows = sum(len(b["id"]) for b in ds.iter_batches(batch_size=None))
                return rows, ray.get_runtime_context().get_node_id()

            ref = execute.remote(200)
            rows, node = ray.get(ref)
            records = [e for e in ray.events.recent() if e.kind == "run_update"
                       and e.library == "data"]
            print(json.dumps({
                "rows": rows, "on_far": node == far.node_id,
                "tasks": sorted({e.task_id for e in records}), "task": hex_id(ref.id - 1),
                "final": [(e.member, e.metrics) for e in records if e.status == "TERMINATED"],
            }))
        finally:
            cluster.shutdown()
    """)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["rows"] == 200 and out["on_far"]
    assert out["tasks"] == [out["task"]]
    [(member, metrics)] = out["final"]
    assert "MapBatches(slow)" in member
    assert dict(metrics)["blocks"] == 8 and dict(metrics)["rows"] == 200

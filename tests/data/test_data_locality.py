"""``ExecutionOptions.locality_with_output`` on a real cluster of two nodes: with it, an
execution's block tasks run on the node of the process that consumes it (the driver's, whose
one CPU makes them wait their turn); without it, they spread to the other node's free CPUs."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

import nbdist
from nbdist import data as rd
from nbdist import events
from nbdist.cluster_utils import Cluster

pytestmark = [pytest.mark.timeout(180), pytest.mark.nbdist_only]


@pytest.fixture
def two_nodes() -> Iterator[Cluster]:
    if nbdist.is_initialized():
        nbdist.shutdown()
    made = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        made.add_node(num_cpus=2)
        made.wait_for_nodes()
        nbdist.init(address=made.address)
        rd.DataContext.get_current().enable_progress_bars = False
        yield made
    finally:
        nbdist.shutdown()
        made.shutdown()


def _slow(batch: dict) -> dict:
    time.sleep(0.2)  # deliberate sleep: tasks last long enough for the driver's node to be busy
    return batch


def _nodes(op: str) -> set[str]:
    """The nodes where the block tasks of operator ``op`` started."""
    recent = events.current_cluster(events.recent())  # not an earlier cluster's same ids
    tasks = {e.task_id for e in recent if type(e) is events.TaskSubmitted
             and e.library_call and e.library_call[0] == "data" and e.library_call[2] == op}
    return {e.node_id for e in recent if type(e) is events.TaskStarted and e.task_id in tasks}


def test_locality_with_output_runs_the_tasks_on_the_consumers_node(two_nodes: Cluster) -> None:
    here = nbdist.get_runtime_context().get_node_id()
    ctx = rd.DataContext.get_current()
    ds = rd.range(80, override_num_blocks=8).map_batches(_slow)
    assert ds.sum("id") == sum(range(80))
    spread = _nodes("ReadRange->MapBatches(_slow)->Aggregate")
    assert len(spread) == 2, spread  # without locality: both nodes
    ctx.execution_options.locality_with_output = True
    try:
        local = rd.range(80, override_num_blocks=8).map_batches(_slow).rename_columns(
            {"id": "n"})
        assert local.sum("n") == sum(range(80))
    finally:
        ctx.execution_options.locality_with_output = False
    assert _nodes("ReadRange->MapBatches(_slow)->RenameColumns->Aggregate") == {here}

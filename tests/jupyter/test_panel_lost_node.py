"""A node lost while the cluster runs (its machine powered off, its network gone) shows as down
in the panel: the comm bridge's hub, fed by a real two-node cluster, sends the node's state in
its deltas. (`%nbdist status` with a host powered off: tests/jupyter/test_ssh_kernel.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from polling import poll

import nbdist
from nbdist.cluster_utils import Cluster
from nbdist.jupyter import bridge

pytestmark = [pytest.mark.timeout(120), pytest.mark.nbdist_only]


class RecordingComm:
    comm_id = "test"

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send(self, data: dict[str, Any]) -> None:
        self.sent.append(data)

    def node_state(self, node_id: str) -> str | None:
        """The node's state in the latest delta that mentions it."""
        for delta in reversed(self.sent):
            node = delta.get("nodes", {}).get(node_id)
            if node is not None:
                return str(node["state"])
        return None


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    if nbdist.is_initialized():  # a cluster an earlier test of this process left attached
        nbdist.shutdown()
    made = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        yield made
    finally:
        nbdist.shutdown()
        made.shutdown()


def test_a_node_killed_while_the_panel_is_open_goes_down_in_its_deltas(
        cluster: Cluster) -> None:
    far = cluster.add_node(num_cpus=1, resources={"far": 1})
    nbdist.init(address=cluster.address)

    @nbdist.remote(resources={"far": 1})
    def there() -> str:
        return nbdist.get_runtime_context().get_node_id()

    assert nbdist.get(there.remote(), timeout=60) == far.node_id
    hub = bridge.Hub()
    comm = RecordingComm()
    hub.attach(comm)  # as the panel's comm: a snapshot, then deltas from the sender thread
    try:
        def state() -> str | None:
            return comm.node_state(far.node_id)

        # Known from the task's records (replayed to the new subscription): up.
        assert poll(state, timeout=30, what="the far node in a snapshot or delta") == "up"
        cluster.remove_node(far, allow_graceful=False)  # SIGKILL: no goodbye to the head
        poll(lambda: state() == "down", timeout=60,
             what="the killed node to show as down in the panel's deltas")
        head = cluster.head_node
        assert head is not None and comm.node_state(head.node_id) == "up"
    finally:
        hub.close(comm)

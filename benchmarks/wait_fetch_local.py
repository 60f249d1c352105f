"""How long ``wait`` takes on objects made on another node, with and without ``fetch_local``.

A two-node cluster on this machine (`nbdist.cluster_utils.Cluster`): a task on the second node
puts ``--count`` arrays of ``--mb`` MB there and returns their refs; the driver then waits for
them with ``fetch_local=False`` (ready once they exist there: nothing is copied) and with
``fetch_local=True`` (ready once copied to the driver's node). Each round makes new objects.
``NBDIST_SAME_HOST_LINKS=0`` makes the nodes send the bytes over the transport, as between
machines, instead of handing over a hard link.

    python benchmarks/wait_fetch_local.py [--mb 40] [--count 3] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import nbdist
from nbdist.cluster_utils import Cluster
from nbdist.driver import runtime


def _store_bytes() -> int:
    """What the driver's node's store holds, in memory or spilled to disk."""
    info = runtime.current().control("node_info")
    return int(info["store_used"]) + int(info["spilled"])


def _settled_store() -> int:
    """The driver's node's store bytes once the last round's objects are freed there."""
    deadline = time.monotonic() + 30
    while True:
        used = _store_bytes()
        if used == 0 or time.monotonic() > deadline:
            return used
        time.sleep(0.01)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=40)
    parser.add_argument("--count", type=int, default=3)  # (a node's store: 150 MiB)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    cluster = Cluster(initialize_head=True, connect=True, head_node_args={"num_cpus": 1})
    try:
        cluster.add_node(num_cpus=1, resources={"beta": 1})
        cluster.wait_for_nodes()

        @nbdist.remote(resources={"beta": 1})
        def make(n: int, count: int) -> list:
            return [nbdist.put(np.full(n, float(i))) for i in range(count)]

        n = args.mb * 2**20 // 8
        out: dict[bool, list[float]] = {False: [], True: []}
        copied: dict[bool, list[int]] = {False: [], True: []}
        for _ in range(args.rounds):
            for fetch_local in (False, True):
                refs = nbdist.get(make.remote(n, args.count))
                before = _settled_store()
                t0 = time.perf_counter()
                ready, _ = nbdist.wait(refs, num_returns=len(refs), fetch_local=fetch_local)
                out[fetch_local].append(time.perf_counter() - t0)
                assert len(ready) == len(refs)
                copied[fetch_local].append(_store_bytes() - before)
                del refs, ready
        for fetch_local in (False, True):
            times = out[fetch_local]
            print(f"wait(fetch_local={fetch_local}) on {args.count} x {args.mb} MB made on the "
                  f"other node: median {statistics.median(times) * 1e3:.2f} ms "
                  f"(min {min(times) * 1e3:.2f}, max {max(times) * 1e3:.2f}); copied to the "
                  f"driver's node: {statistics.median(copied[fetch_local]) / 2**20:.0f} MB")
    finally:
        nbdist.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()

"""Moving a 100 MB object between two nodes on one machine (target: at least 1 GB/s).

    python benchmarks/transfer.py [--mb 100] [--rounds 5]

Starts a head with a 1-CPU node and a second node with a custom resource, attaches, puts a
random array on the first node and runs a task that needs the resource (so it runs on the
second node) and returns the array's size: the value crosses from one node's store to the
other's. Nodes on one machine hand it over as a hard link in the shared-memory folder; with
``NBDIST_SAME_HOST_LINKS=0`` the bytes go through the authenticated TCP transport, as between
machines. The same round trip with a tiny array is subtracted, so the figure is the transfer
alone. Also timed: a 100 MB result coming back.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

NBDIST = os.path.join(os.path.dirname(sys.executable), "nbdist")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as state:
        os.environ["NBDIST_STATE_DIR"] = state
        run = lambda *a: subprocess.run([NBDIST, *a], check=True, capture_output=True,  # noqa: E731
                                        text=True, timeout=60)
        try:
            run("start", "--head", "--port", "0", "--num-cpus", "1")
            address = json.loads(run("status", "--json").stdout)["address"]
            run("start", "--address", address, "--num-cpus", "1", "--resources",
                '{"there": 1}')
            return measure(address, args.mb, args.rounds)
        finally:
            subprocess.run([NBDIST, "stop"], capture_output=True, timeout=60)


def measure(address: str, mb: int, rounds: int) -> int:
    import numpy as np

    import nbdist

    nbdist.init(address=address)
    here = nbdist.get_runtime_context().get_node_id()

    @nbdist.remote(resources={"there": 1})
    def size(a: np.ndarray) -> tuple[int, str]:
        return a.nbytes, nbdist.get_runtime_context().get_node_id()

    @nbdist.remote(resources={"there": 1})
    def make(n: int) -> np.ndarray:
        return np.ones(n // 8)

    tiny = nbdist.put(np.zeros(8))
    for _ in range(3):
        nbdist.get(size.remote(tiny))
    base = []
    for _ in range(20):
        t = time.perf_counter()
        nbdist.get(size.remote(tiny))
        base.append(time.perf_counter() - t)
    base.sort()
    overhead = base[len(base) // 2]
    nbytes = mb * 10**6
    there: list[float] = []
    for i in range(rounds):
        ref = nbdist.put(np.random.default_rng(i).random(nbytes // 8))
        t = time.perf_counter()
        n, node = nbdist.get(size.remote(ref))
        there.append(time.perf_counter() - t - overhead)
        assert n == nbytes and node != here
        del ref
    back: list[float] = []
    for _ in range(rounds):
        t = time.perf_counter()
        arr = nbdist.get(make.remote(nbytes))
        back.append(time.perf_counter() - t)
        assert arr.nbytes == nbytes
        del arr
    nbdist.shutdown()
    best = min(there)
    print(f"{os.cpu_count()} cores; {mb} MB between two nodes on one machine")
    print(f"  task round trip overhead (median of 20): {overhead * 1000:.2f} ms")
    print(f"  argument to the other node: best {best * 1000:.1f} ms = {nbytes / best / 1e9:.2f} "
          f"GB/s; all: " + ", ".join(f"{nbytes / t / 1e9:.2f}" for t in there))
    bb = min(back)
    print(f"  result made there and brought back (includes making it): best {bb * 1000:.1f} ms "
          f"= {nbytes / bb / 1e9:.2f} GB/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

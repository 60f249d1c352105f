"""Allreduce bandwidth, 2 ranks on this machine: nbdist.util.collective (shared memory, and
the ring over TCP as between nodes) against torch.distributed with gloo, same sizes, one run.

    python benchmarks/collective_allreduce.py [--min-kb 1] [--max-mb 64] [--step 4] [--json F]

Each side runs 2 processes (nbdist: 2 actors in a group; gloo: 2 processes joined with
``init_process_group("gloo")``), each allreducing a float32 array of each size: a few warm-up
calls, then 5 rounds of a barrier and ``n`` timed calls (``n`` chosen so a size takes about
0.3 s); a rank's time per call is its median round, the figure is the slower rank's.
Algorithm bandwidth is size / time; bus bandwidth is algorithm bandwidth × 2 (n - 1) / n (what
each rank's link carries: NCCL's convention), equal to the algorithm bandwidth for 2 ranks.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from typing import Any

import numpy as np

WORLD = 2
WARMUP = 3
ROUNDS = 5  # the median round: a burst of other work on the machine skews one round, not all


def sizes(min_kb: int, max_mb: int, step: int) -> list[int]:
    out, size = [], min_kb * 1024
    while size <= max_mb * 1024 * 1024:
        out.append(size)
        size *= step
    return out


def iterations(nbytes: int) -> int:
    # About 0.3 s per size at ~1 GB/s, at least 5 calls, at most 2000.
    return int(min(2000, max(5, 3e8 / max(nbytes, 1))))


def _time_loop(allreduce: Any, barrier: Any, nbytes: int) -> float:
    x = np.zeros(nbytes // 4, dtype=np.float32)  # stays 0: no overflow to inf over the loop
    for _ in range(WARMUP):
        allreduce(x)
    n = max(2, iterations(nbytes) // ROUNDS)
    per_call = []
    for _ in range(ROUNDS):
        barrier()
        t0 = time.perf_counter()
        for _ in range(n):
            allreduce(x)
        per_call.append((time.perf_counter() - t0) / n)
    return float(np.median(per_call))


def run_nbdist(all_sizes: list[int], backend: str) -> dict[int, float]:
    import nbdist
    from nbdist.util import collective as col

    @nbdist.remote
    class Rank:
        def __init__(self, rank: int) -> None:
            col.init_collective_group(WORLD, rank, backend=backend, group_name="bench")

        def measure(self, nbytes: int) -> float:
            return _time_loop(lambda x: col.allreduce(x, "bench"),
                              lambda: col.barrier("bench"), nbytes)

    ranks = [Rank.remote(r) for r in range(WORLD)]
    try:
        return {s: max(nbdist.get([r.measure.remote(s) for r in ranks])) for s in all_sizes}
    finally:
        for r in ranks:
            nbdist.kill(r)


GLOO_WORKER = """
import json, sys, time
import numpy as np
import torch
import torch.distributed as dist
sys.path.insert(0, {here!r})
from collective_allreduce import _time_loop

rank, port, sizes = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{{port}}", rank=rank,
                        world_size={world})
times = {{}}
for s in sizes:
    times[s] = _time_loop(lambda x: dist.all_reduce(torch.from_numpy(x)), dist.barrier, s)
dist.destroy_process_group()
print(json.dumps(times))
"""


def run_gloo(all_sizes: list[int]) -> dict[int, float]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = GLOO_WORKER.format(here=os.path.dirname(os.path.abspath(__file__)), world=WORLD)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(r), str(port),
                               json.dumps(all_sizes)], stdout=subprocess.PIPE, text=True)
             for r in range(WORLD)]
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"a gloo worker failed with exit code {p.returncode}")
        outs.append({int(k): v for k, v in json.loads(out).items()})
    return {s: max(o[s] for o in outs) for s in all_sizes}


def _human(nbytes: int) -> str:
    return f"{nbytes // 2**20} MB" if nbytes >= 2**20 else f"{nbytes // 1024} KB"


def table(all_sizes: list[int], results: dict[str, dict[int, float]]) -> str:
    names = list(results)
    head = "| size | " + " | ".join(f"{n} µs/call | {n} algbw GB/s | {n} busbw GB/s"
                                     for n in names) + " |"
    lines = [head, "|" + " --- |" * (1 + 3 * len(names))]
    for s in all_sizes:
        cells = []
        for n in names:
            t = results[n][s]
            alg = s / t / 1e9
            cells += [f"{t * 1e6:,.0f}", f"{alg:.2f}", f"{alg * 2 * (WORLD - 1) / WORLD:.2f}"]
        lines.append(f"| {_human(s)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-kb", type=int, default=1)
    parser.add_argument("--max-mb", type=int, default=64)
    parser.add_argument("--step", type=int, default=4)
    parser.add_argument("--json", help="also write the raw seconds per call here")
    args = parser.parse_args()
    all_sizes = sizes(args.min_kb, args.max_mb, args.step)
    load_before = os.getloadavg()[0]
    import nbdist

    nbdist.init(num_cpus=WORLD)
    try:
        results = {"nbdist shm": run_nbdist(all_sizes, "shm"),
                   "nbdist ring": run_nbdist(all_sizes, "ring")}
    finally:
        nbdist.shutdown()
    results["gloo"] = run_gloo(all_sizes)
    # On a shared 2-core machine other work skews every column alike; say how busy it was.
    print(f"allreduce, {WORLD} ranks, float32, {os.cpu_count()} cores, load average "
          f"{load_before:.1f} before / {os.getloadavg()[0]:.1f} after")
    print(table(all_sizes, results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cores": os.cpu_count(), "load": [load_before, os.getloadavg()[0]],
                       "seconds_per_call": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Memory of the driver, head and node daemon while one driver queues many tasks.

    python benchmarks/queue_memory.py [--tasks 100000]

Submits the tasks at once (each sleeps 1 ms, so most of them wait in the node's queue), samples
the resident memory (RSS) of the driver, the head and the node daemon every 50 ms until all are
done, then drops the refs and samples again. Prints the peaks and the figures after.
"""

from __future__ import annotations

import argparse
import gc
import os
import threading
import time


def rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    args = parser.parse_args()

    import nbdist
    from nbdist.driver import api

    nbdist.init(num_cpus=2)
    assert api._cluster is not None
    head_pid = api._cluster.procs[0].pid
    node_pid = api._cluster.node_pid
    pids = {"driver": os.getpid(), "head": head_pid, "node": node_pid}
    before = {k: rss(p) for k, p in pids.items()}
    peak = dict(before)
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            for k, p in pids.items():
                peak[k] = max(peak[k], rss(p))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()

    @nbdist.remote
    def tick(i: int) -> int:
        time.sleep(0.001)
        return i

    t0 = time.perf_counter()
    refs = [tick.remote(i) for i in range(args.tasks)]
    submitted = time.perf_counter() - t0
    total = sum(nbdist.get(refs))
    elapsed = time.perf_counter() - t0
    assert total == args.tasks * (args.tasks - 1) // 2
    del refs
    gc.collect()
    time.sleep(1.0)
    after = {k: rss(p) for k, p in pids.items()}
    stop.set()
    sampler.join()
    nbdist.shutdown()
    mib = 1 << 20
    print(f"{os.cpu_count()} cores; {args.tasks} tasks queued in {submitted:.1f} s, all done in "
          f"{elapsed:.1f} s")
    for k in pids:
        print(f"  {k:6s} RSS before {before[k] / mib:6.1f} MiB, peak {peak[k] / mib:6.1f} MiB, "
              f"after the refs are dropped {after[k] / mib:6.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

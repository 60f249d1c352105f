"""Memory protection, nbdist and Ray 2.60 side by side in one run.

    python benchmarks/memory_protection.py [--headroom-mib 512] [--margin-mib 1024] [--no-ray]

For each system: start a 2-CPU cluster whose memory threshold is ``headroom`` above the memory
the machine uses now (nbdist: ``init(memory_usage_threshold=...)``; Ray: the same entry of
``_system_config``), with the monitor checking every 100 ms. Then run a task (max_retries=1)
that allocates 32 MiB at a time until it is killed, or gives up ``margin`` past the
threshold (so the machine is never exhausted). Killed, it runs again, is killed again, and
``get`` raises OutOfMemoryError. Printed per system: the outcome, the number of attempts seen,
the time from submission to the error, and the peak memory in use seen by the task.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

STEP = 32 << 20


def usage() -> tuple[int, int]:
    from nbdist.daemons.memory_monitor import memory_usage

    return memory_usage()


def hog_body(threshold: float, margin: int, path: str) -> str:
    """The task: counts its attempts in ``path``, then allocates until killed."""
    from nbdist.daemons.memory_monitor import memory_usage

    with open(path, "a") as f:
        f.write(f"{os.getpid()}\n")
    held = []
    while True:
        used, total = memory_usage()
        if used > threshold * total + margin:
            return f"not killed at {used / total:.3f}"
        held.append(b"\x01" * STEP)
        time.sleep(0.005)


def run(system: str, headroom: int, margin: int) -> dict[str, Any]:
    used, total = usage()
    threshold = (used + headroom) / total
    path = f"/tmp/nbdist-memory-bench-{os.getpid()}-{system}"
    if os.path.exists(path):
        os.unlink(path)
    if system == "nbdist":
        import nbdist as mod
        mod.init(num_cpus=2, memory_usage_threshold=threshold, memory_monitor_refresh_ms=100)
        oom: tuple[type, ...] = (mod.exceptions.OutOfMemoryError,)
    else:
        import ray as mod
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        mod.init(num_cpus=2, include_dashboard=False, _system_config={
            "memory_usage_threshold": threshold, "memory_monitor_refresh_ms": 100})
        oom = (mod.exceptions.OutOfMemoryError,)
    try:
        hog = mod.remote(max_retries=1)(hog_body)
        t0 = time.perf_counter()
        try:
            outcome = str(mod.get(hog.remote(threshold, margin, path), timeout=300))
        except oom as exc:
            outcome = f"{type(exc).__name__}: {str(exc).splitlines()[0][:150]}"
        elapsed = time.perf_counter() - t0
    finally:
        mod.shutdown()
    with open(path) as f:
        attempts = len(f.read().split())
    os.unlink(path)
    return {"system": system, "threshold": threshold, "outcome": outcome,
            "attempts": attempts, "seconds": elapsed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--headroom-mib", type=int, default=512)
    parser.add_argument("--margin-mib", type=int, default=1024)
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args(argv)
    used, total = usage()
    print(f"machine: {used / 2**30:.2f} GiB of {total / 2**30:.2f} GiB in use; threshold "
          f"{args.headroom_mib} MiB above that")
    results = []
    for system in ["nbdist"] + ([] if args.no_ray else ["ray"]):
        try:
            r = run(system, args.headroom_mib << 20, args.margin_mib << 20)
        except Exception as exc:  # e.g. Ray failing to start on a loaded machine
            print(f"{system:7s} failed: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        results.append(r)
        print(f"{system:7s} threshold {r['threshold']:.3f}  attempts {r['attempts']}  "
              f"{r['seconds']:.2f} s to the outcome: {r['outcome']}")
    if len(results) == 2 and results[1]["seconds"]:
        print(f"time to OutOfMemoryError, nbdist / Ray: "
              f"{results[0]['seconds'] / results[1]['seconds']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

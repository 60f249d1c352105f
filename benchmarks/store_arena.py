"""The object store's two large-object figures, nbdist beside Ray 2.60, in one run:

    python benchmarks/store_arena.py [--rounds 3] [--before /path/to/older/nbdist/checkout]

``put``: ``put`` of a 100 MB float64 array, the ref dropped between puts, best and median of 5,
in GB/s and as a fraction of this machine's warm memcpy of the same array (``np.copyto`` into
an existing array, best of 5, measured in the same child just before). ``sum``: a task summing
that array passed by ref (put once), one warm-up call then the median of 10, in ms (the sum
alone, in the driver on a private array, is printed beside it).

Each backend runs in a fresh interpreter with 2 CPUs; the backends alternate round by round
(``nbdist``, ``ray``, and ``before`` when ``--before`` names an older checkout, run with that
checkout first on ``PYTHONPATH``; ``nbdist-nice0`` with ``--nice0``: nbdist with its task
workers at the node's priority, ``NBDIST_WORKER_NICE=0``, as Ray's are), so a drift in the
machine's load hits all of them. nbdist's task workers run at a lower CPU priority by default
(``worker_nice``): on a machine others keep busy, a task's CPU time then stretches, which the
``nice0`` runs separate from the store's own cost. Every round's figures are printed, then the
median per backend and the spread (min-max).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys

MB100 = 100_000_000

CHILD = r'''
import json, statistics, sys, time
import numpy as np
backend = sys.argv[1]
if backend == "ray":
    import ray
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             _system_config={"agent_register_timeout_ms": 120_000})  # a busy machine
else:
    import nbdist as ray
    ray.init(num_cpus=2)
array = np.arange(%(n)d // 8, dtype=np.float64)
dst = np.empty_like(array)
copies = []
for _ in range(5):
    t = time.perf_counter(); np.copyto(dst, array); copies.append(time.perf_counter() - t)
sums = []
for _ in range(5):
    t = time.perf_counter(); array.sum(); sums.append(time.perf_counter() - t)
puts = []
for _ in range(5):
    t = time.perf_counter(); ref = ray.put(array); puts.append(time.perf_counter() - t)
    del ref
ref = ray.put(array)
total = ray.remote(lambda a: float(a.sum()))
assert ray.get(total.remote(ref)) == float(array.sum())
tasks = []
for _ in range(10):
    t = time.perf_counter(); ray.get(total.remote(ref)); tasks.append(time.perf_counter() - t)
print("@@" + json.dumps({
    "memcpy_gb_s": array.nbytes / min(copies) / 1e9,
    "put_best_gb_s": array.nbytes / min(puts) / 1e9,
    "put_median_gb_s": array.nbytes / statistics.median(puts) / 1e9,
    "sum_task_ms": statistics.median(tasks) * 1e3,
    "sum_alone_ms": statistics.median(sums) * 1e3,
}), flush=True)
ray.shutdown()
'''


def _kill_ray_leftovers(driver_pid: int) -> None:
    """End the processes of the Ray session the child ``driver_pid`` started, if any outlived
    it (a failed ``ray.init`` can leave agents behind)."""
    session = re.compile(rf"session_\d{{4}}-\d\d-\d\d_\d\d-\d\d-\d\d_\d+_{driver_pid}\b")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if session.search(cmdline):
            try:
                os.kill(int(entry), signal.SIGKILL)
            except ProcessLookupError:
                pass


def run_child(backend: str, before: str, tries: int = 4) -> dict[str, float]:
    env = dict(os.environ)
    env.setdefault("RAY_raylet_start_wait_time_s", "120")  # a busy machine: wait, not fail
    cwd = None
    if backend == "nbdist-nice0":
        env["NBDIST_WORKER_NICE"] = "0"
    if backend == "before":
        env["PYTHONPATH"] = before + (os.pathsep + env["PYTHONPATH"] if "PYTHONPATH" in env
                                      else "")
        cwd = before  # not this checkout's folder, which would come first on sys.path
    proc = subprocess.Popen([sys.executable, "-c", CHILD % {"n": MB100},
                             "ray" if backend == "ray" else "nbdist"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=cwd)
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _kill_ray_leftovers(proc.pid)
    for line in out.splitlines():
        if line.startswith("@@"):
            return json.loads(line[2:])
    if tries > 1:  # Ray's start-up can time out on a loaded machine
        print(f"{backend} run failed, once more: {err.strip().splitlines()[-1:]}", flush=True)
        return run_child(backend, before, tries - 1)
    raise RuntimeError(f"{backend} run failed:\n{err[-3000:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", default="", help="an older nbdist checkout to run too")
    parser.add_argument("--nice0", action="store_true",
                        help="also run nbdist with its task workers at normal priority")
    args = parser.parse_args()
    backends = (["nbdist", "ray"] + (["nbdist-nice0"] if args.nice0 else [])
                + (["before"] if args.before else []))
    runs: dict[str, list[dict[str, float]]] = {b: [] for b in backends}
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at start")
    for i in range(args.rounds):
        for backend in backends:
            r = run_child(backend, args.before)
            runs[backend].append(r)
            print(f"round {i + 1} {backend:12s} put best {r['put_best_gb_s']:.2f} GB/s "
                  f"(median {r['put_median_gb_s']:.2f}; memcpy {r['memcpy_gb_s']:.2f}, "
                  f"{r['put_best_gb_s'] / r['memcpy_gb_s']:.2f}x)  sum task "
                  f"{r['sum_task_ms']:.1f} ms (sum alone {r['sum_alone_ms']:.1f} ms)  "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    print("\nmedian over rounds (min-max)")
    for backend in backends:
        rs = runs[backend]

        def fig(key: str, rs: list[dict[str, float]] = rs) -> str:
            values = [r[key] for r in rs]
            return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"

        ratio = [r["put_best_gb_s"] / r["memcpy_gb_s"] for r in rs]
        print(f"{backend:12s} put best GB/s {fig('put_best_gb_s')}  of memcpy "
              f"{statistics.median(ratio):.2f}x ({min(ratio):.2f}-{max(ratio):.2f})  "
              f"memcpy GB/s {fig('memcpy_gb_s')}  sum task ms {fig('sum_task_ms')}  "
              f"sum alone ms {fig('sum_alone_ms')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""nbdist.data side by side with Ray Data 2.60 and plain pyarrow on one core.

Each (system, scenario group) runs in a fresh interpreter (``--child``), the engine started
once there with 2 CPUs; the figure is the wall time of the scenario after the engine is up
(start-up reported on its own line; a small write and read first warms the worker processes
up on both engines). The scan and the Parquet read, short enough to be at the mercy of a
loaded machine, are run ``--repeat`` times on every system and the best time is kept.
Scenarios, sized by ``--rows`` and ``--mb``:

    map_sum        range(rows).map_batches(add one).sum("id")
    parquet_write  a folder of Parquet files, ``mb`` MB of float64 columns
    parquet_read   reading it back and summing a column
    actor_pool     map_batches(callable class, concurrency=2) over range(rows)
    shuffle        random_shuffle of ``mb`` MB read from Parquet, then a column summed

Usage: ``python benchmarks/data_bench.py [--rows N] [--mb M] [--repeat R]
[--systems nbdist,ray,pyarrow]``;
prints a Markdown table (seconds, lower is better) and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

SCENARIOS = ("map_sum", "parquet_write", "parquet_read", "actor_pool", "shuffle")


def _engine(system: str) -> tuple[Any, Any, float]:
    t0 = time.perf_counter()
    if system == "ray":
        import ray
        import ray.data as data

        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        data.DataContext.get_current().enable_progress_bars = False
        return ray, data, time.perf_counter() - t0
    import nbdist
    from nbdist import data as ndata

    nbdist.init(num_cpus=2)
    ndata.DataContext.get_current().enable_progress_bars = False
    return nbdist, ndata, time.perf_counter() - t0


class AddOne:
    def __call__(self, batch: dict) -> dict:
        return {"id": batch["id"] + 1}


def _frame_rows(mb: int) -> int:
    return mb * 1024 * 1024 // 32  # four float64 columns


def _best(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def run_engine(system: str, rows: int, mb: int, folder: str, repeat: int) -> dict[str, float]:
    import numpy as np

    engine, data, startup = _engine(system)
    out = {"startup": startup}

    def timed(name: str, fn: Any, times: int = 1) -> None:
        out[name] = _best(fn, times)

    warm = os.path.join(folder, "warm")  # worker processes started and imports done
    data.range(1000, override_num_blocks=4).map_batches(lambda b: b).write_parquet(warm)
    data.read_parquet(warm).sum("id")
    timed("map_sum", lambda: data.range(rows).map_batches(
        lambda b: {"id": b["id"] + 1}).sum("id"), repeat)
    n = _frame_rows(mb)
    blocks = 16
    src = data.range(n, override_num_blocks=blocks).map_batches(
        lambda b: {f"c{i}": np.random.default_rng(0).random(len(b["id"])) for i in range(4)})
    path = os.path.join(folder, system)
    timed("parquet_write", lambda: src.write_parquet(path))
    timed("parquet_read", lambda: data.read_parquet(path).sum("c0"), repeat)
    timed("actor_pool", lambda: data.range(rows).map_batches(AddOne, concurrency=2).sum("id"))
    timed("shuffle", lambda: data.read_parquet(path).random_shuffle().sum("c0"))
    engine.shutdown()
    return out


def run_pyarrow(rows: int, mb: int, folder: str, repeat: int) -> dict[str, float]:
    """One core, no engine: the physical floor of the scan and the Parquet read."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as pads
    import pyarrow.parquet as pq

    out: dict[str, float] = {"startup": 0.0}

    def scan() -> None:
        step = 1_000_000
        total = 0
        for start in range(0, rows, step):
            t = pa.table({"id": np.arange(start, min(rows, start + step))})
            total += pc.sum(pc.add(t["id"], 1)).as_py()

    out["map_sum"] = _best(scan, repeat)
    n, blocks = _frame_rows(mb), 16
    path = os.path.join(folder, "pyarrow")
    os.makedirs(path)
    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    for i in range(blocks):
        m = n // blocks
        pq.write_table(pa.table({f"c{j}": rng.random(m) for j in range(4)}),
                       os.path.join(path, f"{i}.parquet"))
    out["parquet_write"] = time.perf_counter() - t0
    out["parquet_read"] = _best(lambda: pc.sum(pads.dataset(path).to_table(
        columns=["c0"], use_threads=False)["c0"]), repeat)
    return out


def child(system: str, rows: int, mb: int, repeat: int) -> None:
    folder = tempfile.mkdtemp(prefix="nbdist_data_bench_")
    try:
        result = run_pyarrow(rows, mb, folder, repeat) if system == "pyarrow" else \
            run_engine(system, rows, mb, folder, repeat)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(result))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10**7)
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--systems", default="nbdist,ray,pyarrow")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child")
    args = ap.parse_args()
    if args.child:
        child(args.child, args.rows, args.mb, args.repeat)
        return
    results: dict[str, dict[str, float]] = {}
    for system in args.systems.split(","):
        print(f"running {system} ...", file=sys.stderr)
        proc = subprocess.run([sys.executable, __file__, "--child", system, "--rows",
                               str(args.rows), "--mb", str(args.mb), "--repeat",
                               str(args.repeat)],
                              capture_output=True, text=True, timeout=1800)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode or not lines:
            print(f"{system} failed:\n{proc.stderr[-3000:]}", file=sys.stderr)
            continue
        results[system] = json.loads(lines[-1])
    systems = list(results)
    print(f"rows={args.rows:,} mb={args.mb}\n")
    print("| scenario | " + " | ".join(systems) + " | Ray / nbdist | nbdist / pyarrow |")
    print("|---" * (len(systems) + 3) + "|")
    for name in ("startup",) + SCENARIOS:
        cells = [f"{results[s][name]:.2f} s" if name in results[s] else "–" for s in systems]
        nb = results.get("nbdist", {}).get(name)
        ray_ = results.get("ray", {}).get(name)
        pa_ = results.get("pyarrow", {}).get(name)
        r1 = f"{ray_ / nb:.1f}×" if nb and ray_ else "–"
        r2 = f"{nb / pa_:.1f}×" if nb and pa_ else "–"
        print(f"| {name} | " + " | ".join(cells) + f" | {r1} | {r2} |")


if __name__ == "__main__":
    main()

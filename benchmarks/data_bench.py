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

``--mode train_feed`` measures instead how fast a dataset feeds a 2-worker ``TorchTrainer``
(workers of half a CPU each, so the data tasks have a CPU): ``range(--feed-rows)`` mapped to
a float32 feature column and a label, read by each rank from
``get_dataset_shard("train").iter_torch_batches(batch_size=--batch-size)``, one epoch, on
nbdist and on Ray Data + Ray Train 2.60 (``--systems nbdist,ray``). Its figures are rows/s
summed over the ranks: end to end (all rows over ``fit()``'s wall time, worker start and the
process group included) and while iterating (all rows over the slowest rank's loop time).
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


def _feed_loop(config: dict) -> None:
    """One rank: a pass over its shard in torch batches; its rows and loop time to a file."""
    if config["system"] == "ray":
        from ray import train
    else:
        from nbdist import train
    shard = train.get_dataset_shard("train")
    rows = 0
    t0 = time.perf_counter()
    for batch in shard.iter_torch_batches(batch_size=config["batch_size"]):
        rows += len(batch["y"])
    took = time.perf_counter() - t0
    rank = train.get_context().get_world_rank()
    with open(os.path.join(config["dir"], f"rank{rank}.json"), "w") as f:
        json.dump({"rows": rows, "seconds": took}, f)
    train.report({"rows": rows})


def _features(batch: dict) -> dict:
    import numpy as np

    x = batch["id"].astype(np.float32)
    return {"x": x, "y": 2 * x + 1}


def run_train_feed(system: str, rows: int, batch_size: int, folder: str) -> dict[str, float]:
    engine, data, startup = _engine(system)
    if system == "ray":
        from ray import train
        from ray.train.torch import TorchTrainer
    else:
        from nbdist import train  # type: ignore[no-redef]
        from nbdist.train.torch import TorchTrainer  # type: ignore[no-redef,assignment]
    ds = data.range(rows).map_batches(_features)
    t0 = time.perf_counter()
    TorchTrainer(_feed_loop, train_loop_config={"system": system, "dir": folder,
                                                "batch_size": batch_size},
                 datasets={"train": ds},
                 scaling_config=train.ScalingConfig(num_workers=2,
                                                    resources_per_worker={"CPU": 0.5}),
                 run_config=train.RunConfig(name="feed", storage_path=folder)).fit()
    wall = time.perf_counter() - t0
    ranks = [json.load(open(os.path.join(folder, f"rank{r}.json"))) for r in range(2)]
    engine.shutdown()
    total = sum(r["rows"] for r in ranks)
    return {"startup": startup, "rows": float(total), "fit_s": wall,
            "end_to_end": total / wall,
            "iterating": total / max(r["seconds"] for r in ranks)}


def child(system: str, rows: int, mb: int, repeat: int, mode: str = "scenarios",
          batch_size: int = 1024) -> None:
    folder = tempfile.mkdtemp(prefix="nbdist_data_bench_")
    try:
        if mode == "train_feed":
            result = run_train_feed(system, rows, batch_size, folder)
        elif system == "pyarrow":
            result = run_pyarrow(rows, mb, folder, repeat)
        else:
            result = run_engine(system, rows, mb, folder, repeat)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(result))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10**7)
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--systems", default="nbdist,ray,pyarrow")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--mode", choices=("scenarios", "train_feed"), default="scenarios")
    ap.add_argument("--feed-rows", type=int, default=2_000_000)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--child")
    args = ap.parse_args()
    feed = args.mode == "train_feed"
    rows = args.feed_rows if feed else args.rows
    if args.child:
        child(args.child, rows, args.mb, args.repeat, args.mode, args.batch_size)
        return
    systems = args.systems.split(",")
    if feed:
        systems = [s for s in systems if s != "pyarrow"]  # no trainer without an engine
    results: dict[str, dict[str, float]] = {}
    for system in systems:
        print(f"running {system} ...", file=sys.stderr)
        proc = subprocess.run([sys.executable, __file__, "--child", system, "--mode",
                               args.mode, "--rows" if not feed else "--feed-rows", str(rows),
                               "--mb", str(args.mb), "--repeat", str(args.repeat),
                               "--batch-size", str(args.batch_size)],
                              capture_output=True, text=True, timeout=1800)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode or not lines:
            print(f"{system} failed:\n{proc.stderr[-3000:]}", file=sys.stderr)
            continue
        results[system] = json.loads(lines[-1])
    if feed:
        _feed_table(results, rows, args.batch_size)
        return
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


def _feed_table(results: dict[str, dict[str, float]], rows: int, batch_size: int) -> None:
    systems = list(results)
    print(f"feed_rows={rows:,} batch_size={batch_size} load={os.getloadavg()[0]:.1f}\n")
    print("| figure | " + " | ".join(systems) + " | nbdist / Ray |")
    print("|---" * (len(systems) + 2) + "|")
    for name, unit in (("startup", "s"), ("fit_s", "s"), ("rows", "rows"),
                       ("end_to_end", "rows/s"), ("iterating", "rows/s")):
        cells = [("–" if name not in results[s] else f"{results[s][name]:.2f} s"
                  if unit == "s" else f"{results[s][name]:,.0f} {unit}") for s in systems]
        nb, ray_ = results.get("nbdist", {}).get(name), results.get("ray", {}).get(name)
        ratio = "–"
        if nb and ray_ and unit != "rows":
            ratio = f"{nb / ray_:.1f}×" if unit == "rows/s" else f"{ray_ / nb:.1f}× faster"
        print(f"| {name} | " + " | ".join(cells) + f" | {ratio} |")


if __name__ == "__main__":
    main()

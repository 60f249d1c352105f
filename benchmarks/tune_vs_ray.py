"""nbdist.tune against Ray Tune 2.60: the same search programs on both, in one sitting.

    .venv/bin/python benchmarks/tune_vs_ray.py [--only trivial100,asha20,concurrent16]
        [--engines nbdist,ray,ray-reuse] [--json FILE]

Each (scenario, engine) runs in a fresh interpreter: ``init(num_cpus=2)`` first (not timed),
then ``Tuner(...).fit()`` timed from the call to its return. The program is the same text for
both engines (``import nbdist as ray; from nbdist import tune`` or Ray's own), with
``verbose=0`` and a throwaway ``storage_path``.

Scenarios:
    trivial100     100 trials of a trainable that reports once (num_samples=100)
    asha20         20 trials of a 32-step curve under ASHAScheduler(max_t=32, grace_period=1,
                   reduction_factor=2): trials stopped at rungs, the rest run to the end
    concurrent16   16 trials at once (each asks 1/8 CPU), each running 60 s, reporting every
                   0.25 s; figure: the overhead of the wall time over the ideal 60 s

Engines: ``nbdist`` (its default: actors reused), ``ray`` (Ray's default, reuse_actors=False)
and ``ray-reuse`` (Ray with reuse_actors=True). Ray's default on trivial100 takes minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

SCENARIOS = ("trivial100", "asha20", "concurrent16")
ENGINES = ("nbdist", "ray", "ray-reuse")
CONCURRENT_S = 60.0
CONCURRENT_STEP_S = 0.25


def trivial100(ray: Any, tune: Any, storage: str, reuse: bool | None) -> dict[str, Any]:
    def trivial(config: dict[str, Any]) -> None:
        tune.report({"x": config["x"]})

    start = time.perf_counter()
    grid = tune.Tuner(trivial, param_space={"x": tune.uniform(0, 1)},
                      tune_config=tune.TuneConfig(num_samples=100, reuse_actors=reuse),
                      run_config=_run_config(tune, storage)).fit()
    seconds = time.perf_counter() - start
    assert len(grid) == 100 and not grid.errors
    return {"seconds": seconds}


def asha20(ray: Any, tune: Any, storage: str, reuse: bool | None) -> dict[str, Any]:
    def curve(config: dict[str, Any]) -> None:
        for step in range(1, 33):
            tune.report({"acc": config["q"] * (1 - 1 / (step + 1))})

    scheduler = tune.schedulers.ASHAScheduler(max_t=32, grace_period=1, reduction_factor=2)
    start = time.perf_counter()
    grid = tune.Tuner(curve, param_space={"q": tune.uniform(0, 1)},
                      tune_config=tune.TuneConfig(num_samples=20, metric="acc", mode="max",
                                                  scheduler=scheduler, reuse_actors=reuse),
                      run_config=_run_config(tune, storage)).fit()
    seconds = time.perf_counter() - start
    assert len(grid) == 20 and not grid.errors
    steps = sum(r.metrics["training_iteration"] for r in grid)
    return {"seconds": seconds, "reports": steps}


def concurrent16(ray: Any, tune: Any, storage: str, reuse: bool | None) -> dict[str, Any]:
    def steady(config: dict[str, Any]) -> None:
        begin = time.monotonic()
        for step in range(1, int(CONCURRENT_S / CONCURRENT_STEP_S) + 1):
            time.sleep(max(0.0, begin + step * CONCURRENT_STEP_S - time.monotonic()))
            tune.report({"step": step})

    trainable = tune.with_resources(steady, {"cpu": 0.125})
    start = time.perf_counter()
    grid = tune.Tuner(trainable, param_space={"i": tune.grid_search(list(range(16)))},
                      tune_config=tune.TuneConfig(reuse_actors=reuse,
                                                  max_concurrent_trials=16),
                      run_config=_run_config(tune, storage)).fit()
    seconds = time.perf_counter() - start
    assert len(grid) == 16 and not grid.errors
    return {"seconds": seconds, "overhead": seconds / CONCURRENT_S - 1.0}


def _run_config(tune: Any, storage: str) -> Any:
    return tune.RunConfig(storage_path=storage, verbose=0)


def child(engine: str, scenario: str) -> None:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if engine == "nbdist":
        import nbdist as ray
        from nbdist import tune
        reuse = None
    else:
        import ray  # type: ignore[no-redef]
        from ray import tune  # type: ignore[no-redef]
        reuse = engine == "ray-reuse"
        _prioritize_ray_agents()
    _init(ray, engine)
    with tempfile.TemporaryDirectory() as storage:
        figures = globals()[scenario](ray, tune, storage, reuse)
    ray.shutdown()
    print("RESULT " + json.dumps(figures))


def _init(ray: Any, engine: str, attempts: int = 5) -> None:
    """``init(num_cpus=2)``; Ray's start is retried: on a loaded machine its raylet aborts when
    its agents are slow to start (see ``_prioritize_ray_agents``)."""
    for attempt in range(1, attempts + 1):
        try:
            ray.init(num_cpus=2)
            return
        except Exception as exc:
            if engine == "nbdist" or attempt == attempts:
                raise
            print(f"ray.init failed ({exc}); retrying", file=sys.stderr, flush=True)
            ray.shutdown()


def _prioritize_ray_agents() -> None:
    """Start Ray's dashboard and runtime-env agents at a higher priority (``nice -n -10``).

    Ray's raylet waits a fixed 15 s for its agents to write their port files and aborts when
    their Python start-up is slower, which happens on a loaded 2-core machine. The agents do
    no work on a trial's path, so this changes Ray's start-up only, which is not timed."""
    from ray._private import ray_constants, services

    build = services._build_python_executable_command_memory_profileable
    agents = {ray_constants.PROCESS_TYPE_DASHBOARD_AGENT,
              ray_constants.PROCESS_TYPE_RUNTIME_ENV_AGENT}

    def command(component: str, *args: Any, **kwargs: Any) -> list[str]:
        prefix = ["nice", "-n", "-10"] if component in agents and os.geteuid() == 0 else []
        return prefix + build(component, *args, **kwargs)

    services._build_python_executable_command_memory_profileable = command


def run_one(engine: str, scenario: str) -> dict[str, Any]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child", engine, scenario],
                          capture_output=True, text=True, timeout=3600)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": (proc.stderr or proc.stdout)[-2000:],
            "wall": time.perf_counter() - started}


def table(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    lines = ["| scenario | nbdist | Ray (default) | Ray (reuse_actors) | vs Ray default | "
             "vs Ray reuse |", "| --- | --- | --- | --- | --- | --- |"]
    for scenario, by_engine in results.items():
        cells = [_cell(scenario, by_engine.get(e)) for e in ENGINES]
        ratios = [_ratio(scenario, by_engine.get("nbdist"), by_engine.get(e))
                  for e in ("ray", "ray-reuse")]
        lines.append(f"| {scenario} | " + " | ".join(cells + ratios) + " |")
    return "\n".join(lines)


def _cell(scenario: str, figures: dict[str, Any] | None) -> str:
    if not figures:
        return "–"
    if "error" in figures:
        return "error"
    if scenario == "concurrent16":
        return f"{figures['seconds']:.2f} s ({figures['overhead'] * 100:.1f} % over 60 s)"
    return f"{figures['seconds']:.2f} s"


def _ratio(scenario: str, ours: dict[str, Any] | None, theirs: dict[str, Any] | None) -> str:
    if not ours or not theirs or "error" in ours or "error" in theirs:
        return "–"
    if scenario == "concurrent16":
        return f"{theirs['overhead'] * 100:.1f} % vs {ours['overhead'] * 100:.1f} % overhead"
    return f"{theirs['seconds'] / ours['seconds']:.1f}×"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(SCENARIOS))
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--json")
    parser.add_argument("--child", nargs=2, metavar=("ENGINE", "SCENARIO"))
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for scenario in args.only.split(","):
        for engine in args.engines.split(","):
            print(f"{scenario} on {engine} ...", file=sys.stderr, flush=True)
            figures = run_one(engine, scenario)
            print(f"  {figures}", file=sys.stderr, flush=True)
            results.setdefault(scenario, {})[engine] = figures
    print(table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()

"""nbdist.train against Ray Train 2.60: the same training programs on both, in one sitting.

    .venv/bin/python benchmarks/train_vs_ray.py [--only startup1,startup2,lenet]
        [--engines single,nbdist,ray] [--steps 300] [--pause S] [--json FILE]

Each (scenario, engine) runs in a fresh interpreter: ``init(num_cpus=2)`` first (not timed);
Ray starts without its dashboard, waits up to 120 s for its agents and retries a start that
timed out once, as nbdist's Ray backend starts it. The program is the same text for both
engines (``import nbdist as ray; from nbdist import train`` or Ray's own), with a throwaway
``storage_path``.

Scenarios:
    startup1, startup2   a no-op ``TorchTrainer`` with 1 and 2 workers: seconds from
                         ``TorchTrainer(...)`` to ``fit()`` returning (group start, process
                         group set up, function, end), for the driver's first fit
                         (``first_s``: new worker processes, each imports torch) and for the
                         ``--fits`` - 1 (default 2) later fits in the same driver
                         (``later_s`` the fastest, ``later_max_s`` the slowest: nbdist reuses
                         the idle workers of a clean run, Ray Train starts new ones).
                         Then, in another fresh driver, ``first_prepared_s``: the program a
                         notebook runs cell by cell, ``init``, then ``import
                         <engine>.train.torch`` (nbdist prepares workers that import torch
                         at once), a pause, then the same first fit timed. nbdist's pause is
                         ``wait_ready()``: until its prepared workers have imported torch
                         (``pause_s``); Ray's is a sleep of the same length (nbdist's, when it
                         ran first in this sitting, else ``--pause``)
    bare2                the same with ``DataParallelTrainer`` (no framework: no torch import
                         in the workers), 2 workers: the trainer's own start-up cost
    lenet                the seed's LeNet (44,426 parameters) on synthetic 28x28 images, batch
                         64 per worker, SGD, one torch thread per process: samples/s over
                         ``--steps`` steps after 20 warm-up steps. Engine ``single`` is one
                         plain process (no trainer); ``nbdist`` and ``ray`` run 2 DDP workers
                         (gloo). The DDP runs also time an allreduce of the gradient's size
                         (44,426 float32, 178 KB) and the step's compute alone, the two figures
                         that place the crossover (see docs/train.md).
    lenet1               the same training function in a ``TorchTrainer`` of 1 worker (no DDP
                         wrapper, no allreduce partner): the trainer's cost over one process.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

SCENARIOS = ("startup1", "startup2", "bare2", "lenet", "lenet1")
ENGINES = ("single", "nbdist", "ray")
BATCH = 64
WARMUP = 20
FITS = 3
# Ray's pause in the prepared-workers program when nbdist's was not measured in this sitting.
PAUSE_S = 10.0
# Ray's node may take minutes to start on a loaded machine, for each fit's workers too.
CHILD_TIMEOUT_S = 1500


def lenet() -> Any:
    import torch.nn as nn

    return nn.Sequential(
        nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(16 * 4 * 4, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


def run_steps(model: Any, steps: int) -> float:
    """Seconds for ``steps`` SGD steps on one synthetic batch, after the warm-up."""
    import torch

    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(BATCH, 1, 28, 28, generator=generator)
    y = torch.randint(0, 10, (BATCH,), generator=generator)

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    for _ in range(WARMUP):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return time.perf_counter() - start


def lenet_loop(config: dict[str, Any]) -> None:
    """The training function of the DDP runs, for either engine (``config["train"]``)."""
    import torch
    import torch.distributed as dist

    train = importlib.import_module(config["train"])
    train_torch = importlib.import_module(config["train"] + ".torch")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    plain = lenet()
    compute_s = run_steps(plain, config["steps"] // 4) / (config["steps"] // 4)
    world = train.get_context().get_world_size()
    dist.barrier()
    seconds = run_steps(train_torch.prepare_model(lenet()), config["steps"])
    gradient = torch.zeros(sum(p.numel() for p in plain.parameters()))
    dist.barrier()
    start = time.perf_counter()
    for _ in range(50):
        dist.all_reduce(gradient)
    allreduce_s = (time.perf_counter() - start) / 50
    # Ray Train 2.60 (Train v2) keeps a report's metrics in the Result only with a checkpoint.
    checkpoint = None
    if train.get_context().get_world_rank() == 0:
        checkpoint = train.Checkpoint.from_directory(tempfile.mkdtemp())
    train.report({"samples_per_s": config["steps"] * BATCH * world / seconds,
                  "step_s": seconds / config["steps"], "compute_s": compute_s,
                  "allreduce_s": allreduce_s}, checkpoint=checkpoint)


def noop() -> None:
    pass


def prepared_child(scenario: str, engine: str, pause: float) -> dict[str, Any]:
    """The first fit of a driver that imported the trainer after ``init`` and paused."""
    ray = importlib.import_module("nbdist" if engine == "nbdist" else "ray")
    if engine == "ray":
        _start_ray(ray)
    else:
        ray.init(num_cpus=2)
    start = time.perf_counter()
    train = importlib.import_module(f"{ray.__name__}.train")
    train_torch = importlib.import_module(f"{ray.__name__}.train.torch")
    import_s = time.perf_counter() - start
    start = time.perf_counter()
    if engine == "nbdist":
        if not train_torch.wait_ready(timeout=CHILD_TIMEOUT_S):
            raise RuntimeError("the prepared workers did not import torch in time")
    else:
        time.sleep(pause)
    pause_s = time.perf_counter() - start
    storage = tempfile.TemporaryDirectory(prefix="train-bench-")
    try:
        start = time.perf_counter()
        train_torch.TorchTrainer(
            noop, scaling_config=train.ScalingConfig(num_workers=int(scenario[-1])),
            run_config=train.RunConfig(storage_path=storage.name)).fit()
        return {"first_prepared_s": time.perf_counter() - start, "pause_s": pause_s,
                "import_s": import_s}
    finally:
        ray.shutdown()
        storage.cleanup()


def child(scenario: str, engine: str, steps: int, fits: int) -> dict[str, Any]:
    if engine == "single":
        import torch

        torch.set_num_threads(1)
        torch.manual_seed(0)
        seconds = run_steps(lenet(), steps)
        return {"samples_per_s": steps * BATCH / seconds, "step_s": seconds / steps}
    ray = importlib.import_module("nbdist" if engine == "nbdist" else "ray")
    train = importlib.import_module(f"{ray.__name__}.train")
    train_torch = importlib.import_module(f"{ray.__name__}.train.torch")
    if engine == "ray":
        _start_ray(ray)
    else:
        ray.init(num_cpus=2)
    storage = tempfile.TemporaryDirectory(prefix="train-bench-")
    run_config = train.RunConfig(storage_path=storage.name)
    try:
        if scenario.startswith(("startup", "bare")):
            cls = _bare_trainer(train) if scenario == "bare2" else train_torch.TorchTrainer
            seconds = []
            for _ in range(fits):
                start = time.perf_counter()
                cls(noop, scaling_config=train.ScalingConfig(num_workers=int(scenario[-1])),
                    run_config=run_config).fit()
                seconds.append(time.perf_counter() - start)
            return {"first_s": seconds[0], "later_s": min(seconds[1:]),
                    "later_max_s": max(seconds[1:])}
        trainer = train_torch.TorchTrainer(
            lenet_loop, train_loop_config={"train": train.__name__, "steps": steps},
            scaling_config=train.ScalingConfig(num_workers=1 if scenario == "lenet1" else 2),
            run_config=run_config)
        return dict(trainer.fit().metrics)
    finally:
        ray.shutdown()
        storage.cleanup()


def _bare_trainer(train: Any) -> Any:
    """DataParallelTrainer: Ray 2.60 exports it only from its own module."""
    if hasattr(train, "DataParallelTrainer"):
        return train.DataParallelTrainer
    return importlib.import_module(f"{train.__name__}.data_parallel_trainer").DataParallelTrainer


def _start_ray(ray: Any) -> None:
    """As nbdist's Ray backend starts it: on a loaded machine the raylet's default 30 s wait
    for its dashboard agent runs out, and so can the driver's fixed 30 s wait for the node to
    register (Ray has cleaned up then, and one more try may succeed)."""
    options = {"num_cpus": 2, "include_dashboard": False,
               "_system_config": {"agent_register_timeout_ms": 120_000}}
    try:
        ray.init(**options)
    except Exception as exc:
        if "timed out during startup" not in str(exc):
            raise
        print(f"ray.init timed out ({exc}); trying once more", file=sys.stderr)
        ray.init(**options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(SCENARIOS))
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--fits", type=int, default=FITS, help="fits per start-up scenario")
    parser.add_argument("--pause", type=float, default=PAUSE_S,
                        help="Ray's pause before a prepared first fit, if nbdist's is unknown")
    parser.add_argument("--json")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--prepared", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        figures = (prepared_child(*args.child, args.pause) if args.prepared
                   else child(*args.child, args.steps, args.fits))
        print("RESULT " + json.dumps(figures))
        return
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, cores: {os.cpu_count()}, "
          f"load average: {os.getloadavg()[0]:.1f}", flush=True)
    results: dict[str, dict[str, Any]] = {}
    for scenario in args.only.split(","):
        for engine in args.engines.split(","):
            if (engine == "single") != (scenario == "lenet") and engine == "single":
                continue
            figures = _run_child(scenario, engine, args.steps, args.fits)
            if scenario.startswith("startup"):
                pause = results.get(f"{scenario}/nbdist", {}).get("pause_s", args.pause)
                prepared = _run_child(scenario, engine, args.steps, args.fits, pause)
                figures.update({k if k != "error" else "prepared_error": v
                                for k, v in prepared.items()})
            results[f"{scenario}/{engine}"] = figures
            print(f"{scenario:9} {engine:7} " + "  ".join(
                f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                for k, v in figures.items()), flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cores": os.cpu_count(), "results": results}, f, indent=1)


def _run_child(scenario: str, engine: str, steps: int, fits: int,
               pause: float | None = None) -> dict[str, Any]:
    """One child's figures; with ``pause``, the prepared-workers program."""
    command = [sys.executable, __file__, "--steps", str(steps), "--fits", str(fits),
               "--child", scenario, engine]
    if pause is not None:
        command += ["--prepared", "--pause", str(pause)]
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish within {CHILD_TIMEOUT_S} s"}
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    if out.returncode or not lines:
        return {"error": (out.stderr or out.stdout)[-300:].strip().replace("\n", " | ")}
    figures: dict[str, Any] = json.loads(lines[-1][len("RESULT "):])
    return figures


if __name__ == "__main__":
    main()

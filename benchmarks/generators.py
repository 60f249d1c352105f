"""Streaming generators: item throughput and time to first item, nbdist's engine against Ray
2.60, same machine, one run.

    python benchmarks/generators.py [--items 20000] [--firsts 200] [--json F]

Each side runs in a child process of its own (a fresh cluster of 2 CPUs): a warm-up, then

  items/s (task)    one generator task yields ``--items`` small ints; the driver takes every
                    ref and gets its value as it comes (``for ref in gen: get(ref)``)
  items/s (actor)   the same from a generator method of an actor
  first item        ``--firsts`` times: submit a generator task, the seconds until the
                    value of its first item is in the driver (median)

The sides alternate (nbdist, Ray, nbdist, Ray) so that a drift in machine load hits both; the
better of each side's two runs is reported with the ratio nbdist / Ray (for the time to the
first item, Ray / nbdist: above 1 means nbdist is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from sides import alternate, run_child

CHILD = r"""
import json, statistics, sys, time
backend, items, firsts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if backend == "ray":
    import ray
    # (as nbdist's Ray backend starts it: its agents may start slowly on a loaded machine)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             _system_config={"agent_register_timeout_ms": 120_000})
else:
    import nbdist as ray
    ray.init(num_cpus=2)

@ray.remote
def numbers(n):
    for i in range(n):
        yield i

@ray.remote
class Source:
    def numbers(self, n):
        for i in range(n):
            yield i

def drain(gen):
    total = 0
    for ref in gen:
        total += ray.get(ref)
    return total

def rate(make):
    drain(make(200))
    t0 = time.perf_counter()
    assert drain(make(items)) == items * (items - 1) // 2
    return items / (time.perf_counter() - t0)

def first_item():
    times = []
    for _ in range(10):
        ray.get(next(numbers.remote(1)))
    for _ in range(firsts):
        t0 = time.perf_counter()
        gen = numbers.remote(1)
        ray.get(next(gen))
        times.append(time.perf_counter() - t0)
        drain(gen)
    return statistics.median(times)

source = Source.remote()
out = {"task_items_per_s": rate(numbers.remote),
       "actor_items_per_s": rate(source.numbers.remote),
       "first_item_s": first_item()}
ray.shutdown()
print("RESULT " + json.dumps(out), flush=True)
"""


def run_side(backend: str, items: int, firsts: int) -> dict[str, float]:
    return run_child(CHILD, backend, items, firsts, timeout=1200)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--items", type=int, default=20_000)
    p.add_argument("--firsts", type=int, default=200)
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    runs = alternate(lambda backend: run_side(backend, args.items, args.firsts))
    best = {b: {"task_items_per_s": max(r["task_items_per_s"] for r in rs),
                "actor_items_per_s": max(r["actor_items_per_s"] for r in rs),
                "first_item_s": min(r["first_item_s"] for r in rs)} for b, rs in runs.items()}
    report: dict[str, Any] = {"items": args.items, "firsts": args.firsts, "best": best,
                              "runs": runs, "time": time.time(),
                              "load": os.getloadavg()}
    print(f"streaming generators ({args.items} items; first item: median of {args.firsts}), "
          "best of 2 runs:")
    print(f"{'':26} {'nbdist':>10} {'Ray 2.60':>10} {'ratio':>7}")
    for key, label in (("task_items_per_s", "items/s, generator task"),
                       ("actor_items_per_s", "items/s, actor method")):
        ours, theirs = best["nbdist"][key], best["ray"][key]
        print(f"{label:26} {ours:10.0f} {theirs:10.0f} {ours / theirs:6.1f}x")
    ours, theirs = best["nbdist"]["first_item_s"], best["ray"]["first_item_s"]
    print(f"{'time to first item, ms':26} {ours * 1e3:10.2f} {theirs * 1e3:10.2f} "
          f"{theirs / ours:6.1f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""ActorPool map throughput: nbdist's engine against Ray 2.60, same machine, one run.

    python benchmarks/actor_pool.py [--items 5000] [--actors 2] [--json F]

Each side runs in a child process of its own (a fresh cluster of 2 CPUs) with ``--actors``
actors in a ``util.ActorPool``: a warm-up, then

  map/s             ``list(pool.map(lambda a, v: a.double.remote(v), range(items)))``: values
                    in order, each actor given its next value as soon as it returns one
  map_unordered/s   the same with ``pool.map_unordered`` (values as they come)

The sides alternate (nbdist, Ray, nbdist, Ray) so that a drift in machine load hits both; the
better of each side's two runs is reported with the ratio nbdist / Ray.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from sides import alternate, run_child

CHILD = r"""
import json, sys, time
backend, items, actors = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if backend == "ray":
    import ray
    from ray.util import ActorPool
    # (as nbdist's Ray backend starts it: its agents may start slowly on a loaded machine)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             _system_config={"agent_register_timeout_ms": 120_000})
else:
    import nbdist as ray
    from nbdist.util import ActorPool
    ray.init(num_cpus=2)

@ray.remote(num_cpus=0)
class Doubler:
    def double(self, v):
        return 2 * v

pool = ActorPool([Doubler.remote() for _ in range(actors)])

def call(actor, value):
    return actor.double.remote(value)

def rate(how):
    list(how(call, range(200)))
    t0 = time.perf_counter()
    got = list(how(call, range(items)))
    elapsed = time.perf_counter() - t0
    assert sorted(got) == [2 * i for i in range(items)]
    return items / elapsed

out = {"map_per_s": rate(pool.map), "map_unordered_per_s": rate(pool.map_unordered)}
ray.shutdown()
print("RESULT " + json.dumps(out), flush=True)
"""


def run_side(backend: str, items: int, actors: int) -> dict[str, float]:
    return run_child(CHILD, backend, items, actors, timeout=900)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--items", type=int, default=5_000)
    p.add_argument("--actors", type=int, default=2)
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    runs = alternate(lambda backend: run_side(backend, args.items, args.actors))
    best = {b: {k: max(r[k] for r in rs) for k in rs[0]} for b, rs in runs.items()}
    report: dict[str, Any] = {"items": args.items, "actors": args.actors, "best": best,
                              "runs": runs, "time": time.time(),
                              "load": os.getloadavg()}
    print(f"ActorPool of {args.actors} actors, {args.items} values, per second, best of 2 runs:")
    print(f"{'':20} {'nbdist':>10} {'Ray 2.60':>10} {'ratio':>7}")
    for key, label in (("map_per_s", "map"), ("map_unordered_per_s", "map_unordered")):
        ours, theirs = best["nbdist"][key], best["ray"][key]
        print(f"{label:20} {ours:10.0f} {theirs:10.0f} {ours / theirs:6.1f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

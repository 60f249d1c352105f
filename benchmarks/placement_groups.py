"""Placement groups created, made ready and removed per second: nbdist's engine against Ray
2.60, same machine, one run.

    python benchmarks/placement_groups.py [--seconds 5] [--bundles 1] [--json F]

Each side runs in a child process of its own (a fresh cluster of 2 CPUs): a warm-up, then for
``--seconds`` a loop of ``pg = placement_group([{"CPU": 1}] * bundles)``,
``get(pg.ready())``, ``remove_placement_group(pg)``, and the same loop with an actor created
in the group and called once before the removal (what a training run does per worker group).
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
backend, seconds, bundles = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
if backend == "ray":
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
    # (as nbdist's Ray backend starts it: its agents may start slowly on a loaded machine)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             _system_config={"agent_register_timeout_ms": 120_000})
else:
    import nbdist as ray
    from nbdist.util.placement_group import placement_group, remove_placement_group
    from nbdist.util.scheduling_strategies import PlacementGroupSchedulingStrategy
    ray.init(num_cpus=2)

@ray.remote(num_cpus=1)
class Member:
    def ping(self):
        return 1

def cycle():
    pg = placement_group([{"CPU": 1}] * bundles)
    ray.get(pg.ready())
    remove_placement_group(pg)

def cycle_with_actor():
    pg = placement_group([{"CPU": 1}] * bundles)
    ray.get(pg.ready())
    member = Member.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg)).remote()
    ray.get(member.ping.remote())
    remove_placement_group(pg)

def rate(fn):
    for _ in range(5):
        fn()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        n += 1
    return n / (time.perf_counter() - t0)

out = {"groups_per_s": rate(cycle), "groups_with_actor_per_s": rate(cycle_with_actor)}
ray.shutdown()
print("RESULT " + json.dumps(out), flush=True)
"""


def run_side(backend: str, seconds: float, bundles: int) -> dict[str, float]:
    return run_child(CHILD, backend, seconds, bundles, timeout=600)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--bundles", type=int, default=1)
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    runs = alternate(lambda backend: run_side(backend, args.seconds, args.bundles))
    best = {b: {k: max(r[k] for r in rs) for k in rs[0]} for b, rs in runs.items()}
    report: dict[str, Any] = {"bundles": args.bundles, "seconds": args.seconds, "best": best,
                              "runs": runs, "time": time.time(),
                              "load": os.getloadavg()}
    print(f"placement groups ({args.bundles} bundle(s) of 1 CPU), per second, best of 2 runs:")
    print(f"{'':32} {'nbdist':>10} {'Ray 2.60':>10} {'ratio':>7}")
    for key, label in (("groups_per_s", "create + ready + remove"),
                       ("groups_with_actor_per_s", "... + an actor in it, one call")):
        ours, theirs = best["nbdist"][key], best["ray"][key]
        print(f"{label:32} {ours:10.1f} {theirs:10.1f} {ours / theirs:6.1f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

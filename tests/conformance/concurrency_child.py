"""Run by test_conformance_concurrency.py in a fresh interpreter: ``python FILE BACKEND``.

Starts a new cluster of 2 CPUs (``nbdist``: nbdist's engine; ``ray``: nbdist on Ray;
``ray-itself``: Ray's own API, the reference), runs the concurrency scenarios in this order
(the parallel sleepers first, right after ``init``, while the worker pool is as ``init`` left
it), and prints one JSON line: what each task recorded about itself (pid, start and end times),
plus the session directory for the leftover check. The functions travel by value (this file
runs as ``__main__``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

CPUS = 2
SLEEP_S = 3.0  # long next to a warm worker's dispatch; the check never reads a duration
ADD_S = 0.3
MEET_TIMEOUT_S = 60.0


def span(seconds: float) -> tuple[int, float, float]:
    start = time.time()
    time.sleep(seconds)
    return os.getpid(), start, time.time()


def add(a: Any, b: Any) -> tuple[int, list[list[float]]]:
    """A sum that also carries the (start, end) of every add that led to it."""
    start = time.time()
    time.sleep(ADD_S)
    value_a, spans_a = a if isinstance(a, tuple) else (a, [])
    value_b, spans_b = b if isinstance(b, tuple) else (b, [])
    return value_a + value_b, [*spans_a, *spans_b, [start, time.time()]]


class Meeting:
    """Async calls that each wait until all have arrived (they must run at the same time)."""

    def __init__(self) -> None:
        self.arrived = 0
        self.all_here = asyncio.Event()

    async def meet(self, expected: int) -> tuple[float, float, bool]:
        start = time.time()
        print(f"arrived at {start}")
        self.arrived += 1
        if self.arrived >= expected:
            self.all_here.set()
        try:
            await asyncio.wait_for(self.all_here.wait(), MEET_TIMEOUT_S)
        except TimeoutError:
            pass
        return start, time.time(), self.arrived >= expected


def identity(x: Any) -> Any:
    return x


def type_names(x: Any) -> list[str]:
    items = x.values() if isinstance(x, dict) else x
    return [type(item).__name__ for item in items]


def init(backend: str) -> tuple[Any, type, dict[str, Any]]:
    """(the API module, its ObjectRef type, what init returned)."""
    if backend == "ray-itself":
        import ray

        info = ray.init(num_cpus=CPUS, include_dashboard=False,
                        _system_config={"agent_register_timeout_ms": 120_000})
        return ray, ray.ObjectRef, {"session_dir": info.address_info["session_dir"]}
    import nbdist

    return nbdist, nbdist.ObjectRef, nbdist.init(num_cpus=CPUS, backend=backend)


def scenarios(api: Any, ref_type: type) -> dict[str, Any]:
    out: dict[str, Any] = {}
    out["sleepers"] = api.get([api.remote(span).remote(SLEEP_S) for _ in range(CPUS)])
    radd = api.remote(add)
    chain: Any = 0
    for x in range(1, 5):
        chain = radd.remote(chain, x)
    out["chain"] = api.get(chain)
    level: list[Any] = list(range(8))
    while len(level) > 1:
        level = [radd.remote(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    out["tree"] = api.get(level[0])
    meeting = api.remote(Meeting).remote()
    out["meet"] = api.get([meeting.meet.remote(4) for _ in range(4)])
    inner = api.put(5)
    rid = api.remote(identity)
    returned = [api.get(rid.remote([inner]))[0], api.get(rid.remote({"k": inner}))["k"]]
    out["returned_types"] = [type(r).__name__ for r in returned]
    out["returned_are_refs"] = [isinstance(r, ref_type) for r in returned]
    out["returned_values"] = [api.get(r) for r in returned]
    out["argument_types"] = (api.get(api.remote(type_names).remote([inner]))
                             + api.get(api.remote(type_names).remote({"k": inner})))
    return out


def main(backend: str) -> int:
    api, ref_type, info = init(backend)
    try:
        result = scenarios(api, ref_type)
    finally:
        api.shutdown()
    result["session_dir"] = info.get("session_dir", "")
    sys.stdout.write("@@result@@ " + json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))

"""Running one side of a side-by-side benchmark (nbdist or Ray) in a child process of its own.

The benchmark scripts next to this file import it (``python benchmarks/x.py`` puts this folder
on ``sys.path``). A child prints one line ``RESULT {json}``; a side whose Ray node did not
start in time (a loaded machine: Ray's raylet gives up waiting for its agents) starts again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any


def run_child(code: str, backend: str, *args: Any, timeout: float = 900,
              starts: int = 3) -> dict[str, Any]:
    """Run ``code`` with ``backend`` and ``args`` as its argv; the dict it printed."""
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    for _ in range(starts):
        done = subprocess.run([sys.executable, "-c", code, backend, *map(str, args)],
                              capture_output=True, text=True, timeout=timeout, env=env)
        for line in done.stdout.splitlines():
            if line.startswith("RESULT "):
                result: dict[str, Any] = json.loads(line[7:])
                return result
        if "timed out during startup" not in done.stderr:
            break
    raise RuntimeError(f"the {backend} side failed:\n{done.stderr[-3000:]}")


def alternate(run: Callable[[str], dict[str, Any]], rounds: int = 2
              ) -> dict[str, list[dict[str, Any]]]:
    """``run(backend)`` for nbdist then Ray, ``rounds`` times: a drift in the machine's load
    hits both sides alike."""
    runs: dict[str, list[dict[str, Any]]] = {"nbdist": [], "ray": []}
    for _ in range(rounds):
        for backend in runs:
            runs[backend].append(run(backend))
    return runs

"""``breakpoint()`` in a task or actor method on ``backend="ray"``: say where its debugger is.

On Ray, a remote ``breakpoint()`` is Ray's own: by default (``RAY_DEBUG`` unset or "1") the
worker waits, silently as far as the notebook can see, for VS Code's Ray Distributed Debugger
to attach; with ``RAY_DEBUG=legacy`` it opens Ray's remote pdb, which ``ray debug`` in a
terminal attaches to. nbdist's in-cell pdb (``%nbdist debug``) is its own engine's, so a cell
blocked on such a task would just hang. `hook` (installed as ``sys.breakpointhook`` in each Ray
worker nbdist runs in, by `nbdist.backends.ray.worker.install`) first writes one line to the
task's stderr, which reaches the cell like any output: which task stopped, and what attaches
to it. Then it stops as Ray would, at the caller's line: in legacy mode through Ray's remote
pdb on the caller's frame, otherwise through the hook ``PYTHONBREAKPOINT`` names (Ray's).
``PYTHONBREAKPOINT=0`` keeps breakpoints off and silent, as in plain Python.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

DOCS = "https://docs.ray.io/en/latest/ray-observability/ray-distributed-debugger.html"


def message(name: str, pid: int, mode: str) -> str:
    """The line a task stopped at ``breakpoint()`` on Ray writes (``mode``: RAY_DEBUG)."""
    head = f"nbdist: task {name!r} (pid {pid}) stopped at breakpoint() on backend='ray': "
    if mode == "legacy":
        how = ("Ray's remote pdb waits: run `ray debug` in a terminal on the cluster's head "
               "to attach (`c` lets the task go on).")
    else:
        how = (f"Ray waits for VS Code's Ray Distributed Debugger to attach ({DOCS}); for a "
               "terminal pdb instead, set RAY_DEBUG=legacy in the workers' environment "
               "(runtime_env={'env_vars': {'RAY_DEBUG': 'legacy'}}) and run `ray debug`.")
    return (head + how + " The cell's own pdb prompt (%nbdist debug) needs nbdist's engine "
            "(init() without backend='ray').\n")


def hook(*args: Any, **kwargs: Any) -> Any:
    """``sys.breakpointhook`` in a Ray worker: the line above, then Ray's debugger."""
    if os.environ.get("PYTHONBREAKPOINT") == "0":
        return None
    frame = sys._getframe(1)
    mode = os.environ.get("RAY_DEBUG", "1")
    sys.stderr.write(message(_call_name(), os.getpid(), mode))
    sys.stderr.flush()
    if mode == "legacy":
        import ray
        from ray.util import rpdb

        worker = ray._private.worker.global_worker
        if worker.debugger_breakpoint == b"":  # (Ray's check: one debugger at a time)
            debugger = rpdb._connect_ray_pdb(
                host=None, port=None, patch_stdstreams=False, quiet=None,
                breakpoint_uuid=None, debugger_external=worker.ray_debugger_external)
            debugger.set_trace(frame=frame)
        return None
    return sys.__breakpointhook__(*args, **kwargs)


def _no_call() -> str:
    return "?"


_call_name: Callable[[], str] = _no_call


def install(call_name: Callable[[], str]) -> None:
    """Make `hook` this process's ``sys.breakpointhook``; ``call_name()`` names the running
    task or method."""
    global _call_name
    _call_name = call_name
    sys.breakpointhook = hook

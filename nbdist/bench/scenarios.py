"""The scenarios of `nbdist microbenchmark` and the child process that runs one of them.

A child is a fresh interpreter that loads this file by path under a private name (never as
``nbdist.bench.scenarios``: a Ray run must not load nbdist), imports the backend under the name
``ray``, initialises it, runs one scenario and prints one marked JSON line. So this module
imports only the standard library; numpy is imported by the scenarios that use it. The /proc
helpers find a driver's cluster (its descendants, its session's members, processes naming its
session directory) for the footprint and for the parent's check of processes left behind.
See `nbdist.bench.microbenchmark` for what each figure means.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# The top-level imports are those the scenario children need, all of which both backends import
# anyway: a child's start is part of the cold-start figure.
NUM_CPUS = 2
SLEEP_S = 0.5
N_ROUNDS = 3
LOOP_S = 2.0
N_ASYNC = 10_000
N_CHAIN = 1_000
N_LEAVES = 1_024
PUT_BYTES = 100_000_000
N_PUTS = 5
N_GETS = 10
IDLE_S = 2.0
DEFAULT_TIMEOUT_S = 180.0
LEFTOVER_GRACE_S = 5.0

_MARK = "@@nbdist-microbenchmark@@ "
# Load this file as a module that is not importable by name (so remote functions defined here
# travel by value), through the normal loader (so its bytecode cache is used).
_CHILD_CODE = (
    "import importlib.util as u, sys; "
    "s = u.spec_from_file_location('__nbdist_bench_child__', sys.argv[1]); "
    "m = u.module_from_spec(s); sys.modules[s.name] = m; s.loader.exec_module(m); "
    "del sys.modules[s.name]; sys.exit(m.child_main(sys.argv[2:]))"
)
_SESSION_RE = re.compile(
    r"session_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_\d+_\d+|nbdist-session-[A-Za-z0-9_]+")
# nbdist's API on its Ray backend (init(backend="ray")): ``--backend ray``.
RAY_BACKEND = "nbdist-on-ray"
_INSTALL_HINT = "run `make bench` or `pip install -e '.[bench]'` (ray==2.60.0)"


# --------------------------------------------------------------------------- /proc helpers


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    ppid: int
    session: int


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def _proc_table() -> dict[int, ProcInfo]:
    """Every live (non-zombie) process: pid -> ppid, session id."""
    table: dict[int, ProcInfo] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        data = _read(f"/proc/{name}/stat")
        if data is None:
            continue
        fields = data.rsplit(b")", 1)[1].split()
        if fields[0] != b"Z":
            table[int(name)] = ProcInfo(int(name), int(fields[1]), int(fields[3]))
    return table


def _cmdline(pid: int) -> str:
    data = _read(f"/proc/{pid}/cmdline") or b""
    return data.replace(b"\0", b" ").decode(errors="replace").strip()


def _descendants(root: int, table: dict[int, ProcInfo]) -> set[int]:
    children: dict[int, list[int]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info.pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _session_tokens(pids: Iterable[int]) -> set[str]:
    return {m for pid in pids for m in _SESSION_RE.findall(_cmdline(pid))}


def _related(root: int, tokens: Iterable[str] = ()) -> set[int]:
    """Live processes started by ``root``: its descendants, the members of its session (if it
    leads one), and those whose command line names a session directory found in theirs (or one
    of ``tokens``, for a root that is gone)."""
    table = _proc_table()
    pids = _descendants(root, table) | {p for p, info in table.items() if info.session == root}
    found = set(tokens) | _session_tokens(pids | {root})
    if found:
        pids |= {p for p in table if any(t in _cmdline(p) for t in found)}
    return pids - {root}


def _cluster_pids(driver: int) -> set[int]:
    """The driver and every process of its cluster (see the module docstring)."""
    return {driver} | _related(driver)


def _uss_kib(pid: int) -> int | None:
    """Private_Clean + Private_Dirty (kB): the memory freed if the process went away."""
    data = _read(f"/proc/{pid}/smaps_rollup") or _read(f"/proc/{pid}/smaps")
    if data is None:
        return None
    total = 0
    for line in data.decode(errors="replace").splitlines():
        if line.startswith(("Private_Clean:", "Private_Dirty:")):
            total += int(line.split()[1])
    return total


def _short_name(cmdline: str) -> str:
    """``raylet``, ``ray::IDLE``, ``python -m nbdist.daemons.node``, ``python .../monitor.py``."""
    argv = cmdline.split()
    if not argv:
        return "?"
    exe = os.path.basename(argv[0])
    if not exe.startswith("python"):
        return exe
    rest = [a for a in argv[1:] if a != "-u"]
    if rest[:1] == ["-m"] and len(rest) > 1:
        return f"python -m {rest[1]}"
    if rest and not rest[0].startswith("-"):
        return f"python {os.path.basename(rest[0])}"
    return "python"


def _kill(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


# --------------------------------------------------------------------------- child side
# Runs inside a scenario subprocess, ``ray`` being the backend module. The remote functions are
# shipped by value: the child's module is not importable by name in the workers.


def _noop() -> None:
    return None


def _inc(x: int) -> int:
    return x + 1


def _add(a: int, b: int) -> int:
    return a + b


class _Actor:
    def m(self) -> None:
        return None


def _warm_up(ray: Any) -> Any:
    """Run a few tasks so the worker pool is up; return the remote no-op function."""
    f = ray.remote(_noop)
    ray.get([f.remote() for _ in range(10 * NUM_CPUS)])
    return f


def _calls_per_s(call: Callable[[], Any], seconds: float) -> float:
    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        call()
        n += 1
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)


def _scenario_cold_start(ray: Any) -> dict[str, Any]:
    f = ray.remote(_noop)
    start = time.perf_counter()
    ray.get(f.remote())
    return {"first_result_wall": time.time(), "first_task_s": time.perf_counter() - start}


def _sleep() -> None:
    time.sleep(SLEEP_S)


def _scenario_parallel_rounds(ray: Any) -> dict[str, Any]:
    f = ray.remote(_sleep)
    rounds = []
    for _ in range(N_ROUNDS):
        start = time.perf_counter()
        ray.get([f.remote() for _ in range(NUM_CPUS)])
        rounds.append(time.perf_counter() - start)
    return {"first_round_s": rounds[0], "rounds_s": sum(rounds), "each_round_s": rounds}


def _scenario_sync_round_trip(ray: Any) -> dict[str, Any]:
    f = _warm_up(ray)
    _calls_per_s(lambda: ray.get(f.remote()), 0.3)
    rate = _calls_per_s(lambda: ray.get(f.remote()), LOOP_S)
    return {"calls_per_s": rate, "latency_ms": 1000.0 / rate}


def _scenario_async_throughput(ray: Any) -> dict[str, Any]:
    f = _warm_up(ray)
    start = time.perf_counter()
    refs = [f.remote() for _ in range(N_ASYNC)]
    submitted = time.perf_counter() - start
    ray.get(refs)
    elapsed = time.perf_counter() - start
    return {"tasks_per_s": N_ASYNC / elapsed, "seconds": elapsed, "submit_s": submitted}


def _scenario_chain(ray: Any) -> dict[str, Any]:
    _warm_up(ray)
    inc = ray.remote(_inc)
    start = time.perf_counter()
    ref = inc.remote(0)
    for _ in range(N_CHAIN - 1):
        ref = inc.remote(ref)
    value = ray.get(ref)
    elapsed = time.perf_counter() - start
    if value != N_CHAIN:
        raise AssertionError(f"chain returned {value!r}, expected {N_CHAIN}")
    return {"seconds": elapsed, "tasks_per_s": N_CHAIN / elapsed}


def _scenario_tree_reduce(ray: Any) -> dict[str, Any]:
    _warm_up(ray)
    add = ray.remote(_add)
    start = time.perf_counter()
    level: list[Any] = list(range(N_LEAVES))
    while len(level) > 1:
        level = [add.remote(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    value = ray.get(level[0])
    elapsed = time.perf_counter() - start
    expected = N_LEAVES * (N_LEAVES - 1) // 2
    if value != expected:
        raise AssertionError(f"tree reduce returned {value!r}, expected {expected}")
    return {"seconds": elapsed, "tasks": N_LEAVES - 1}


def _scenario_actor_calls(ray: Any) -> dict[str, Any]:
    actor = ray.remote(_Actor).remote()
    ray.get(actor.m.remote())
    _calls_per_s(lambda: ray.get(actor.m.remote()), 0.3)
    sync_rate = _calls_per_s(lambda: ray.get(actor.m.remote()), LOOP_S)
    start = time.perf_counter()
    ray.get([actor.m.remote() for _ in range(N_ASYNC)])
    elapsed = time.perf_counter() - start
    return {"sync_calls_per_s": sync_rate, "async_calls_per_s": N_ASYNC / elapsed}


def _scenario_put_get(ray: Any) -> dict[str, Any]:
    import statistics

    import numpy as np

    array = np.arange(PUT_BYTES // 8, dtype=np.float64)
    put_s = []
    for _ in range(N_PUTS):
        start = time.perf_counter()
        ref = ray.put(array)
        put_s.append(time.perf_counter() - start)
        del ref
    ref = ray.put(array)
    get_s = []
    for _ in range(N_GETS):
        start = time.perf_counter()
        value = ray.get(ref)
        get_s.append(time.perf_counter() - start)
        del value
    first, second = ray.get(ref), ray.get(ref)
    if first.shape != array.shape or first[-1] != array[-1]:
        raise AssertionError("get returned an array that differs from the one put")
    return {
        "put_gb_per_s": array.nbytes / min(put_s) / 1e9,
        "put_s": put_s,
        "get_ms": statistics.median(get_s) * 1000.0,
        "get_s": get_s,
        "zero_copy": (not first.flags.writeable) and bool(np.shares_memory(first, second)),
        "writeable": bool(first.flags.writeable),
        "aliases_original": bool(np.shares_memory(first, array)),
    }


def _total(a: Any) -> float:
    return float(a.sum())


def _scenario_sum_by_ref(ray: Any) -> dict[str, Any]:
    import statistics

    import numpy as np

    array = np.arange(PUT_BYTES // 8, dtype=np.float64)
    ref = ray.put(array)
    total = ray.remote(_total)
    expected = float(array.sum())
    if ray.get(total.remote(ref)) != expected:
        raise AssertionError("the task summed something else than the array put")
    times = []
    for _ in range(N_GETS):
        start = time.perf_counter()
        ray.get(total.remote(ref))
        times.append(time.perf_counter() - start)
    return {"sum_ms": statistics.median(times) * 1000.0, "sum_s": times}


def _scenario_idle_footprint(ray: Any) -> dict[str, Any]:
    f = ray.remote(_noop)
    ray.get(f.remote())
    time.sleep(IDLE_S)
    procs = []
    for pid in sorted(_cluster_pids(os.getpid())):
        kib = _uss_kib(pid)
        if kib is not None:
            name = "driver" if pid == os.getpid() else _short_name(_cmdline(pid))
            procs.append({"pid": pid, "name": name, "uss_mib": kib / 1024})
    return {"uss_mib": sum(p["uss_mib"] for p in procs), "procs": len(procs), "processes": procs}


SCENARIOS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "cold_start": _scenario_cold_start,
    "parallel_rounds": _scenario_parallel_rounds,
    "sync_round_trip": _scenario_sync_round_trip,
    "async_throughput": _scenario_async_throughput,
    "chain": _scenario_chain,
    "tree_reduce": _scenario_tree_reduce,
    "actor_calls": _scenario_actor_calls,
    "put_get": _scenario_put_get,
    "sum_by_ref": _scenario_sum_by_ref,
    "idle_footprint": _scenario_idle_footprint,
}


def _init_backend(ray: Any, backend: str) -> None:
    if backend == "ray":
        # The same start-up allowances init(backend="ray") makes on a busy machine: a longer
        # wait for Ray's node agent, and one more try when Ray's fixed 30 s wait runs out.
        # And the same machine-wide lock: one local Ray node starts at a time.
        from nbdist.backends.ray.startup import local_start_lock

        options = {"num_cpus": NUM_CPUS, "include_dashboard": False,
                   "_system_config": {"agent_register_timeout_ms": 120_000}}
        with local_start_lock():
            try:
                ray.init(**options)
            except Exception as exc:
                if "timed out during startup" not in str(exc):
                    raise
                ray.init(**options)
    elif backend == RAY_BACKEND:
        ray.init(num_cpus=NUM_CPUS, backend="ray")
    else:
        ray.init(num_cpus=NUM_CPUS)


def _emit(payload: dict[str, Any]) -> None:
    sys.stdout.write(_MARK + json.dumps(payload) + "\n")
    sys.stdout.flush()


def child_main(argv: Sequence[str]) -> int:
    """Entry point of a scenario subprocess: ``BACKEND SCENARIO``; prints one marked line."""
    backend, scenario = argv[0], argv[1]
    entered = time.time()
    ray: Any = None
    try:
        start = time.perf_counter()
        ray = importlib.import_module("nbdist" if backend == RAY_BACKEND else backend)
        imported = time.perf_counter()
        _init_backend(ray, backend)
        phases = {"import_s": imported - start, "init_s": time.perf_counter() - imported}
        result = SCENARIOS[scenario](ray)
        result["session_tokens"] = sorted(_session_tokens(_cluster_pids(os.getpid())))
        _emit({"ok": True, "result": {"child_main_wall": entered, **phases, **result}})
    except BaseException as exc:
        _emit({"ok": False, "error": f"{type(exc).__name__}: {exc}",
               "traceback": traceback.format_exc()})
        return 1
    finally:
        if ray is not None and hasattr(ray, "shutdown"):
            ray.shutdown()
    return 0

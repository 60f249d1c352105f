"""`nbdist microbenchmark`: nbdist's core API against Ray's, scenario by scenario.

What is measured (each figure by the same scenario code for both backends, the backend module
being imported under the name ``ray``, with 2 logical CPUs):

``cold_start``        wall time from spawning the interpreter to the first remote result
                      (import, ``init`` and one task): the parent takes ``time.time()`` just
                      before spawning, the child just after ``get(f.remote())`` returns.
``parallel_rounds``   right after ``init``, 3 rounds of 2 tasks that sleep 0.5 s each (one per
                      CPU), each round got before the next: seconds of the first round and of
                      all 3 (0.5 and 1.5 when the tasks of a round run together at once).
``sync_round_trip``   ``get(f.remote())`` in a loop for 2 s after a warm-up: calls/s.
``async_throughput``  10,000 empty tasks submitted, then one ``get`` of all: tasks/s.
``chain``             1,000 dependent tasks (each gets the previous ref): seconds.
``tree_reduce``       pairwise sums of 1,024 leaves, one task per sum (1,023 tasks): seconds.
``actor_calls``       ``get(a.m.remote())`` in a loop for 2 s (sync), then 10,000
                      ``a.m.remote()`` submitted and got at once (pipelined): calls/s.
``put_get``           ``put`` of a 100 MB float64 array, best of 5, the ref deleted between:
                      GB/s; ``get`` of it, median of 10: ms, and whether it is zero-copy
                      (read-only and sharing memory across two gets).
``sum_by_ref``        a task summing a 100 MB float64 array passed by ref (put once), median
                      of 10 after one warm-up call: ms.
``idle_footprint``    after ``init``, one task and 2 s idle: the USS (Private_Clean +
                      Private_Dirty of ``/proc/PID/smaps_rollup``) summed over the driver and
                      every process of its cluster: MiB and process count.

How: every (scenario, backend) pair runs in a fresh interpreter (``sys.executable -c``) that
loads this file under a private name (not as ``nbdist.bench.microbenchmark``: a Ray run never loads
nbdist), initialises the backend, runs the scenario, prints one JSON line and shuts down. Its
stdout and stderr go to temporary files, so a daemon that keeps them open cannot stall the
parent. The child starts a new session; at a timeout the whole tree is killed, and processes
still alive after a normal exit are reported (and killed) as left behind. The cluster of a
driver is its descendants, the members of its session, and any process whose command line
names the session directory of one of them (Ray's ``session_...``, nbdist's
``nbdist-session-...``): checked against a live Ray 2.60, where all of them are descendants.

``--backend ray`` measures nbdist's API on its Ray backend (``init(backend="ray")``, column
``nbdist-on-ray``) instead of on nbdist's engine; with ``--compare ray`` beside Ray itself,
which shows what nbdist's layer (events, output capture, wrapper types) costs on Ray.

With ``--compare ray`` the backends alternate scenario by scenario, so a drift in machine load
hits both. ``--repeat N`` runs each pair N times and reports the median run. The ratio column
is nbdist's advantage (>1: nbdist is better): speed over speed, time over time inverted, Ray's
MiB over nbdist's. ``--json FILE`` keeps every run: its figures, the child's phases
(``interpreter_start_s``, ``import_s``, ``init_s``), errors with their tracebacks, the
processes of the footprint. This module imports neither ray nor numpy: only the children do.
The table's rows, ratios and Markdown are in `nbdist.bench.table`.
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
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

# The top-level imports are those the scenario children need, all of which both backends import
# anyway: a child's start is part of the cold-start figure. The parent's tools (argparse,
# subprocess, platform, ...) are imported where they are used.

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
        options = {"num_cpus": NUM_CPUS, "include_dashboard": False,
                   "_system_config": {"agent_register_timeout_ms": 120_000}}
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


# --------------------------------------------------------------------------- parent side


@dataclass
class Run:
    """One scenario in one backend, one time."""

    backend: str
    scenario: str
    ok: bool = False
    result: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    detail: str = ""
    note: str = ""
    wall_s: float = 0.0
    leftover: list[str] = field(default_factory=list)


def _child_env() -> dict[str, str]:
    """The parent's environment, with the parent's own import path (the checkout) on it."""
    env = dict(os.environ)
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    extra = [p for p in sys.path if p and os.path.isdir(p)
             and not any(os.path.realpath(p).startswith(pre) for pre in prefixes)]
    if env.get("PYTHONPATH"):
        extra.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(extra))
    # A benchmark run should not report usage statistics over the network.
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    return env


def _leftovers(child_pid: int, tokens: Sequence[str]) -> list[int]:
    """Processes of a finished child's cluster still alive after a grace period."""
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    while True:
        alive = sorted(_related(child_pid, tokens))
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.1)


def _kill_tree(child_pid: int) -> None:
    _kill(_related(child_pid) | {child_pid})


def _parse_child(run: Run, stdout: str, stderr: str, code: int | None) -> None:
    lines = [ln for ln in stdout.splitlines() if ln.startswith(_MARK)]
    try:
        payload = json.loads(lines[-1][len(_MARK):]) if lines else {}
    except ValueError:
        payload = {"ok": False, "error": f"unreadable result line: {lines[-1][:200]!r}"}
    if payload:
        run.ok = bool(payload["ok"])
        run.result = payload.get("result", {})
        run.error = payload.get("error", "")
        run.detail = payload.get("traceback", "")
    if not run.ok and not run.error:
        tail = [ln for ln in stderr.splitlines() if ln.strip()][-1:]
        run.error = f"exited with code {code}" + (f": {tail[0]}" if tail else "")
        run.detail = "\n".join(stderr.splitlines()[-40:])


def _run_child(backend: str, scenario: str, timeout: float) -> Run:
    import subprocess
    import tempfile

    run = Run(backend, scenario)
    argv = [sys.executable, "-c", _CHILD_CODE, os.path.abspath(__file__), backend, scenario]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        spawned = time.time()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                env=_child_env(), start_new_session=True)
        timed_out = False
        try:
            code: int | None = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_tree(proc.pid)
            code = proc.wait()
        except BaseException:
            _kill_tree(proc.pid)
            proc.wait()
            raise
        run.wall_s = time.time() - spawned
        out.seek(0)
        err.seek(0)
        _parse_child(run, out.read().decode(errors="replace"),
                     err.read().decode(errors="replace"), code)
    if timed_out:
        if run.ok:
            run.note = f"shutdown did not finish within the {timeout:.0f} s timeout: killed"
        else:
            run.error = f"timed out after {timeout:.0f} s"
    if "first_result_wall" in run.result:
        run.result["cold_start_s"] = run.result["first_result_wall"] - spawned
    if "child_main_wall" in run.result:
        run.result["interpreter_start_s"] = run.result.pop("child_main_wall") - spawned
    left = _leftovers(proc.pid, run.result.get("session_tokens", []))
    run.leftover = [f"{pid} {_short_name(_cmdline(pid))}" for pid in left]
    _kill(left)
    return run


# --------------------------------------------------------------------------- machine and CLI


def _version(dist: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    import platform

    meminfo = (_read("/proc/meminfo") or b"").decode()
    total_kib = next((int(ln.split()[1]) for ln in meminfo.splitlines()
                      if ln.startswith("MemTotal:")), 0)
    cpuinfo = (_read("/proc/cpuinfo") or b"").decode()
    model = next((ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines()
                  if ln.startswith("model name")), platform.processor())
    return {
        "cores": os.cpu_count(),
        "cpu": model,
        "ram_gib": round(total_kib / 2**20, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "ray": _version("ray"),
        "nbdist": _version("nbdist"),
        "numpy": _version("numpy"),
        "load_avg_at_start": os.getloadavg(),
    }


def format_machine(info: dict[str, Any]) -> str:
    load = ", ".join(f"{x:.2f}" for x in info["load_avg_at_start"])
    return (f"machine: {info['cores']} cores ({info['cpu']}), {info['ram_gib']} GiB RAM, "
            f"Python {info['python']}, Ray {info['ray'] or 'not installed'}, "
            f"nbdist {info['nbdist'] or '(checkout)'}; load average at start {load}")


def _parse_args(argv: Sequence[str]) -> argparse.Namespace:
    import argparse

    parser = argparse.ArgumentParser(
        prog="nbdist microbenchmark",
        description="Measure nbdist's core API (optionally side by side with Ray 2.60).",
        epilog="scenarios: " + ", ".join(SCENARIOS))
    parser.add_argument("--compare", choices=["ray"],
                        help="also run every scenario on Ray and print the ratio")
    parser.add_argument("--backend", choices=["nbdist", "ray"], default="nbdist",
                        help="nbdist's own engine (default) or nbdist on Ray "
                        "(init(backend='ray')); with --compare ray, beside Ray itself")
    parser.add_argument("--only", metavar="NAME[,NAME]",
                        help="run only these scenarios (or the scenarios of these figures)")
    parser.add_argument("--json", metavar="FILE", help="write every raw figure to FILE")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="run each scenario N times and report the median run")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help=f"per scenario run (default {DEFAULT_TIMEOUT_S:.0f} s)")
    return parser.parse_args(list(argv))


def _select(only: str | None) -> list[str] | str:
    """The scenarios to run, or an error message."""
    if not only:
        return list(SCENARIOS)
    from nbdist.bench.table import METRICS

    by_metric = {m.key: m.scenario for m in METRICS}
    chosen: list[str] = []
    for name in (n.strip() for n in only.split(",") if n.strip()):
        scenario = name if name in SCENARIOS else by_metric.get(name)
        if scenario is None:
            return f"unknown scenario {name!r}; choose from {', '.join(SCENARIOS)}"
        if scenario not in chosen:
            chosen.append(scenario)
    return chosen


def _backends(args: argparse.Namespace) -> list[str] | str:
    import importlib.util

    first = RAY_BACKEND if args.backend == "ray" else "nbdist"
    backends = [first, "ray"] if args.compare else [first]
    if any(b in ("ray", RAY_BACKEND) for b in backends) and importlib.util.find_spec(
            "ray") is None:
        return (f"Ray is not installed for {sys.executable}; {_INSTALL_HINT}, then run this "
                "command again")
    if args.repeat < 1:
        return "--repeat must be at least 1"
    return backends


def _describe(run: Run) -> str:
    from nbdist.bench.table import METRICS, format_value

    if not run.ok:
        return f"FAILED: {run.error}"
    shown = [m for m in METRICS if m.scenario == run.scenario and m.key in run.result]
    figures = "; ".join(format_value(m, run.result) for m in shown)
    note = f" ({run.note})" if run.note else ""
    return f"done in {run.wall_s:.1f} s: {figures}{note}"


def run_all(scenarios: Sequence[str], backends: Sequence[str], repeat: int,
            timeout: float) -> dict[str, dict[str, list[Run]]]:
    """Run every (scenario, repeat, backend), backends alternating; progress on stderr."""
    runs: dict[str, dict[str, list[Run]]] = {b: {} for b in backends}
    total = len(scenarios) * repeat * len(backends)
    step = 0
    for scenario in scenarios:
        for _ in range(repeat):
            for backend in backends:
                step += 1
                tag = f"[{step:>2}/{total}] {backend:<6} {scenario}"
                print(f"{tag} ...", file=sys.stderr, flush=True)
                run = _run_child(backend, scenario, timeout)
                print(f"{tag} {_describe(run)}", file=sys.stderr, flush=True)
                if run.leftover:
                    print(f"{tag} warning: left {len(run.leftover)} processes behind after "
                          f"shutdown (killed): {', '.join(run.leftover)}",
                          file=sys.stderr, flush=True)
                runs[backend].setdefault(scenario, []).append(run)
    return runs


def _report_errors(runs: dict[str, dict[str, list[Run]]]) -> str:
    lines = [f"- {r.backend} {r.scenario}: {r.error}" for by_scenario in runs.values()
             for rs in by_scenario.values() for r in rs if not r.ok]
    return ("errors:\n" + "\n".join(lines)) if lines else ""


def _write_json(path: str, info: dict[str, Any], argv: Sequence[str],
                runs: dict[str, dict[str, list[Run]]], rows: list[dict[str, Any]]) -> None:
    payload = {
        "machine": info,
        "argv": list(argv),
        "runs": {b: {s: [asdict(r) for r in rs] for s, rs in by.items()}
                 for b, by in runs.items()},
        "rows": rows,
    }
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(payload, fh, indent=2)
        fh.write("\n")


def main(argv: list[str]) -> int:
    """`nbdist microbenchmark ...`: 0 when every scenario ran, 1 if some failed, 2 on misuse."""
    # The table is the parent's alone; a scenario child loads this file outside the package.
    from nbdist.bench.table import METRICS, build_rows, format_table

    args = _parse_args(argv)
    scenarios = _select(args.only)
    backends = _backends(args)
    for problem in (scenarios, backends):
        if isinstance(problem, str):
            print(f"nbdist microbenchmark: error: {problem}", file=sys.stderr)
            return 2
    assert isinstance(scenarios, list) and isinstance(backends, list)
    info = machine_info()
    print(format_machine(info), file=sys.stderr, flush=True)
    started = time.monotonic()
    try:
        runs = run_all(scenarios, backends, args.repeat, args.timeout)
    except KeyboardInterrupt:
        print("nbdist microbenchmark: interrupted", file=sys.stderr)
        return 130
    metrics = [m for m in METRICS if m.scenario in scenarios]
    rows = build_rows(metrics, runs, backends)
    print(format_machine(info))
    print(format_table(rows, backends))
    errors = _report_errors(runs)
    if errors:
        print(errors)
    print(f"total {time.monotonic() - started:.0f} s", file=sys.stderr)
    if args.json:
        _write_json(args.json, info, argv, runs, rows)
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

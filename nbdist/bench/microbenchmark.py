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
loads `nbdist.bench.scenarios` by path under a private name (a Ray run never loads nbdist),
initialises the backend, runs the scenario, prints one JSON line and shuts down. Its stdout and
stderr go to temporary files, so a daemon that keeps them open cannot stall the parent. The
child starts a new session; at a timeout the whole tree is killed, and processes still alive
after a normal exit are reported (and killed) as left behind. The cluster of a driver is its
descendants, the members of its session, and any process whose command line names the session
directory of one of them (Ray's ``session_...``, nbdist's ``nbdist-session-...``): checked
against a live Ray 2.60, where all of them are descendants.

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

import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

from nbdist.bench import scenarios
from nbdist.bench.scenarios import (
    _CHILD_CODE,
    _INSTALL_HINT,
    _MARK,
    DEFAULT_TIMEOUT_S,
    LEFTOVER_GRACE_S,
    RAY_BACKEND,
    SCENARIOS,
    _cmdline,
    _kill,
    _read,
    _related,
    _short_name,
)

# The parent's tools (argparse, subprocess, platform, ...) are imported where they are used.

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
    argv = [sys.executable, "-c", _CHILD_CODE, os.path.abspath(scenarios.__file__), backend,
            scenario]
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

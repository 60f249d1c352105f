"""Run a folder of Ray's core unit-test files once on Ray and once on nbdist; write a table.

    .venv/bin/python benchmarks/ray_unit_tests/run.py --tests /tmp/ray_tests
    .venv/bin/python benchmarks/ray_unit_tests/run.py --tests /tmp/ray_tests --sides nbdist
    .venv/bin/python benchmarks/ray_unit_tests/run.py --report-only

Each file runs in its own pytest process per side, with this folder's ``conftest.py`` as a
plugin and a per-test limit (pytest-timeout). Every test's start and outcome go to
``<out>/<side>/<file>.jsonl`` as they happen; a run that stops answering (a test stuck where
pytest-timeout's signal cannot reach it) is killed with its process group and restarted on
the tests not yet run, the stuck one counted as failed. ``<out>/table.md`` then has, per file,
the tests collected, those that pass on Ray, and of those the ones that pass on nbdist; and
the list of tests that pass on Ray and fail on nbdist, each with the first line of its error.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIDES = ("ray", "nbdist")

# Tests left out on both sides, with why: what they need is more than a shared 2-core machine.
DESELECT = {
    "test_generators.py::test_generator_oom": "100 values of 100 MB each (10 GB through the "
    "object store)",
}


def _env(side: str, tests: Path, log: Path) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(HERE), str(HERE / "site"), str(tests)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["RAY_UNIT_TESTS_LOG"] = str(log)
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env.pop("NBDIST_AS_RAY", None)
    if side == "nbdist":
        env["NBDIST_AS_RAY"] = "1"
    return env


def read_log(log: Path) -> dict:
    """The file's run as far as it went: collected ids, outcome per id, reasons, started."""
    state: dict = {"collected": [], "outcome": {}, "reason": {}, "started": [], "errors": []}
    if not log.exists():
        return state
    for line in log.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        event = rec.get("event")
        if event == "collected":
            for nodeid in rec["nodeids"]:
                if nodeid not in state["collected"]:
                    state["collected"].append(nodeid)
        elif event == "collect_error":
            state["errors"].append(rec)
        elif event == "start":  # a test run again (--rerun-failed): its last run counts
            state["started"].append(rec["nodeid"])
            state["outcome"].pop(rec["nodeid"], None)
            state["reason"].pop(rec["nodeid"], None)
        elif event == "report":
            _fold(state, rec)
    return state


def _fold(state: dict, rec: dict) -> None:
    nodeid, outcome = rec["nodeid"], rec["outcome"]
    current = state["outcome"].get(nodeid)
    if outcome == "failed":
        if current != "failed":
            state["outcome"][nodeid] = "failed"
            where = "" if rec["when"] == "call" else f"[{rec['when']}] "
            state["reason"][nodeid] = where + rec.get("reason", "")
    elif outcome == "skipped" and current is None:
        state["outcome"][nodeid] = "skipped"
    elif outcome == "passed" and rec["when"] == "call" and current is None:
        state["outcome"][nodeid] = "passed"


def _stuck(log: Path, idle: float) -> bool:
    return log.exists() and time.time() - log.stat().st_mtime > idle


def run_file(side: str, tests: Path, name: str, out: Path, timeout: int,
             rerun_failed: bool = False) -> None:
    log = out / side / f"{name}.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    remaining: list[str] = [name]
    if rerun_failed:
        state = read_log(log)
        remaining = [n for n in state["collected"] if state["outcome"].get(n) != "passed"
                     and n not in DESELECT]
        if not remaining:
            return
    else:
        log.unlink(missing_ok=True)
    for _attempt in range(30):
        cmd = [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider",
               "-o", "addopts=", "-q", "--rootdir", str(tests), f"--timeout={timeout}",
               *[arg for nodeid in DESELECT for arg in ("--deselect", nodeid)], *remaining]
        stdout = open(out / side / f"{name}.out", "a", encoding="utf-8")
        # The idle clock starts now: a rerun's log was last written by the earlier run, and
        # read as stuck from the start, its pytest was killed before it ran a test.
        log.touch()
        proc = subprocess.Popen(cmd, cwd=tests, env=_env(side, tests, log), stdout=stdout,
                                stderr=subprocess.STDOUT, start_new_session=True)
        idle = timeout + 90
        while proc.poll() is None:
            time.sleep(2)
            if _stuck(log, idle):
                break
        hung = proc.poll() is None
        _kill_group(proc)
        stdout.close()
        state = read_log(log)
        remaining = [n for n in state["collected"] if n not in state["outcome"]]
        if not remaining or (not hung and not state["collected"]):
            return
        # The run stopped answering, or pytest stopped short (an internal error): the test it
        # was in is failed, the others run again.
        last = state["started"][-1] if state["started"] else None
        if last in remaining:
            stuck = last
        else:  # it stopped between tests: in the first one it never began
            stuck = next((n for n in remaining if n not in state["started"]), remaining[0])
        reason = f"hung: no answer in {idle} s" if hung else "pytest stopped here: " + _last_error(
            out / side / f"{name}.out")
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"event": "report", "nodeid": stuck, "when": "call",
                                "outcome": "failed", "reason": reason}) + "\n")
        remaining = [n for n in remaining if n != stuck]
        if not remaining:
            return


def _last_error(output: Path) -> str:
    lines = [ln for ln in output.read_text(encoding="utf-8", errors="replace").splitlines()
             if "Error" in ln]
    return lines[-1].strip()[:200] if lines else "no error printed"


def _kill_group(proc: subprocess.Popen) -> None:
    """End the pytest process and whatever it started (its own session), by group id."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        time.sleep(3)
    proc.wait()


def report(out: Path, files: list[str]) -> str:
    rows, failures, totals = [], [], [0, 0, 0]
    for name in files:
        ray_state = read_log(out / "ray" / f"{name}.jsonl")
        nb_state = read_log(out / "nbdist" / f"{name}.jsonl")
        collected = ray_state["collected"] or nb_state["collected"]
        on_ray = [n for n in collected if ray_state["outcome"].get(n) == "passed"]
        on_both = [n for n in on_ray if nb_state["outcome"].get(n) == "passed"]
        rows.append(f"| `{name}` | {len(collected)} | {len(on_ray)} | {len(on_both)} |")
        for i, value in enumerate((len(collected), len(on_ray), len(on_both))):
            totals[i] += value
        for nodeid in on_ray:
            if nodeid not in on_both:
                outcome = nb_state["outcome"].get(nodeid, "not run")
                reason = nb_state["reason"].get(nodeid, outcome)
                if not nb_state["outcome"] and nb_state["errors"]:
                    reason = "collection: " + nb_state["errors"][0].get("reason", "")
                failures.append(f"- `{nodeid}`: {reason}")
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"Ray's core unit tests, run {stamp}", "",
             "| file | tests | pass on Ray | of those, pass on nbdist |",
             "| --- | ---: | ---: | ---: |", *rows,
             f"| **total** | {totals[0]} | {totals[1]} | {totals[2]} |", "",
             "Left out on both sides: " + "; ".join(f"`{k}` ({v})" for k, v in DESELECT.items()),
             "",
             "Pass on Ray, fail on nbdist:", "", *failures, ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tests", type=Path, default=Path("/tmp/ray_tests"),
                        help="folder of Ray's test files (python/ray/tests)")
    parser.add_argument("--files", nargs="*", help="file names in it (default: test_*.py)")
    parser.add_argument("--sides", nargs="*", choices=SIDES, default=list(SIDES))
    parser.add_argument("--timeout", type=int, default=60, help="seconds per test")
    parser.add_argument("--out", type=Path, default=Path("/tmp/ray_unit_tests_results"))
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--rerun-failed", action="store_true",
                        help="run again the tests of the last run that did not pass (a test's "
                        "last run counts): a loaded machine fails tests that are not at fault")
    args = parser.parse_args()
    tests = args.tests.resolve()
    files = args.files or sorted(p.name for p in tests.glob("test_*.py"))
    if not args.report_only:
        for name in files:
            for side in args.sides:
                started = time.monotonic()
                run_file(side, tests, name, args.out, args.timeout, args.rerun_failed)
                print(f"{name} on {side}: {time.monotonic() - started:.0f} s", flush=True)
    logged = {p.name[: -len(".jsonl")] for p in (args.out / "ray").glob("test_*.py.jsonl")}
    table = report(args.out, sorted(logged | set(files)))
    (args.out / "table.md").write_text(table, encoding="utf-8")
    print(table)


if __name__ == "__main__":
    main()

"""Fault injection with recovery times, for docs/reliability.md.

    python benchmarks/faults.py [--rounds 3]

Each round injects, on real processes:
  worker   SIGKILL the worker running a task; time from the kill to the retried task's result.
  node     SIGKILL a joined node daemon running a task forwarded to it; time from the kill to
           the result of the same task run again on the head's node.
  actor    SIGKILL the node daemon hosting an actor (max_restarts=1) while a call runs there;
           time from the kill to that call's result from the actor restarted on another node.
  driver   SIGKILL a driver (a script that started a local cluster); time until every process
           of its cluster has exited and its shared-memory files are gone.
and prints one line per fault with the time taken, or the failure.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator

from nbdist.cluster import lifetime

NBDIST = os.path.join(os.path.dirname(sys.executable), "nbdist")


_alive = lifetime.process_running


def _recovered(script: str, env: dict[str, str]) -> float:
    """Run a driver script; the seconds it printed after ``RECOVERED``."""
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=90)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RECOVERED")][0]
    return float(line.split()[1])


def worker_kill() -> float:
    import nbdist

    nbdist.init(num_cpus=1)
    try:
        @nbdist.remote(max_retries=1)
        def slow(path: str) -> int:
            with open(path, "w") as f:
                f.write(str(os.getpid()))
            time.sleep(1.0)
            return 7

        with tempfile.TemporaryDirectory() as tmp:
            marker = os.path.join(tmp, "pid")
            ref = slow.remote(marker)
            while not os.path.exists(marker) or not open(marker).read():
                time.sleep(0.005)
            pid = int(open(marker).read())
            os.unlink(marker)
            t0 = time.perf_counter()
            os.kill(pid, signal.SIGKILL)
            assert nbdist.get(ref, timeout=60) == 7
            # The retry sleeps 1 s as well: report the time beyond the task's own.
            return time.perf_counter() - t0 - 1.0
    finally:
        nbdist.shutdown()


@contextlib.contextmanager
def _cluster(*joins: list[str]) -> Iterator[tuple[dict[str, str], str, list[dict]]]:
    """A head (1 CPU) and one joined node per entry of ``joins`` (its extra `start` flags),
    started with the `nbdist` command in a state folder of its own: (env, address, nodes)."""
    with tempfile.TemporaryDirectory() as state:
        env = dict(os.environ, NBDIST_STATE_DIR=state)

        def run(*a: str) -> str:
            return subprocess.run([NBDIST, *a], env=env, check=True, capture_output=True,
                                  text=True, timeout=60).stdout

        try:
            run("start", "--head", "--port", "0", "--num-cpus", "1")
            address = json.loads(run("status", "--json"))["address"]
            for flags in joins:
                run("start", "--address", address, "--num-cpus", "1", *flags)
            yield env, address, json.loads(run("status", "--json"))["nodes"]
        finally:
            subprocess.run([NBDIST, "stop"], env=env, capture_output=True, timeout=60)


def node_kill() -> float:
    with _cluster([]) as (env, address, nodes):
        script = textwrap.dedent(f"""
            import os, signal, time, nbdist
            nbdist.init(address={address!r})
            @nbdist.remote
            def slow(i):
                print("started", i, flush=True)
                time.sleep(1.0)
                return i
            refs = [slow.remote(i) for i in range(2)]
            time.sleep(0.5)
            t0 = time.perf_counter()
            os.kill({nodes[1]["pid"]}, signal.SIGKILL)
            assert nbdist.get(refs, timeout=60) == [0, 1]
            print("RECOVERED", time.perf_counter() - t0 - 1.0)
        """)
        return _recovered(script, env)


def actor_node_kill() -> float:
    spot = ["--resources", '{"spot": 1}']
    with _cluster(spot, spot) as (env, address, nodes):
        pids = {n["node_id"]: n["pid"] for n in nodes}
        script = textwrap.dedent(f"""
            import os, signal, time, nbdist
            nbdist.init(address={address!r})
            @nbdist.remote(resources={{"spot": 1}}, max_restarts=1, max_task_retries=1)
            class Service:
                def node(self):
                    return nbdist.get_runtime_context().get_node_id()
                def slow(self):
                    time.sleep(1.0)
                    return self.node()
            service = Service.remote()
            first = nbdist.get(service.node.remote())
            ref = service.slow.remote()
            time.sleep(0.5)
            t0 = time.perf_counter()
            os.kill({pids!r}[first], signal.SIGKILL)
            assert nbdist.get(ref, timeout=60) != first
            print("RECOVERED", time.perf_counter() - t0 - 1.0)
        """)
        return _recovered(script, env)


def driver_kill() -> float:
    script = textwrap.dedent("""
        import os, sys, time, nbdist
        nbdist.init(num_cpus=2)
        ref = nbdist.put(bytes(8_000_000))
        print("READY", flush=True)
        time.sleep(600)
    """)
    before = set(glob.glob("/dev/shm/nbdist-*"))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.readline()
    kids: set[int] = set()
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = open(stat).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == proc.pid:
            kids.add(int(stat.split("/")[2]))
    grandkids = set()
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = open(stat).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) in kids:
            grandkids.add(int(stat.split("/")[2]))
    everyone = kids | grandkids
    t0 = time.perf_counter()
    proc.kill()
    proc.wait()
    while any(_alive(p) for p in everyone) or set(glob.glob("/dev/shm/nbdist-*")) - before:
        if time.perf_counter() - t0 > 30:
            raise RuntimeError("cluster processes or shared memory outlived the driver")
        time.sleep(0.01)
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores")
    for name, fn in (("worker", worker_kill), ("node", node_kill), ("actor", actor_node_kill),
                     ("driver", driver_kill)):
        times = []
        for _ in range(args.rounds):
            try:
                times.append(fn())
            except Exception as exc:
                print(f"{name:7s} FAILED: {exc}")
        if times:
            print(f"{name:7s} survived {len(times)}/{args.rounds}; recovery "
                  + ", ".join(f"{t * 1000:.0f} ms" for t in times))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

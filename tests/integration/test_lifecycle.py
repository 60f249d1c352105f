"""Lifecycle: a cluster lives and dies with its driver and leaves nothing behind.

A driver script runs in a subprocess, does some work (tasks, an actor, a large put) and reports
READY. The test then records every process the driver started, found two ways: walking parent
pids under /proc, and looking for a token the driver put in its environment (which catches a
process that was re-parented away from the tree). It then ends the driver (SIGKILL, a clean
``shutdown()``, or a normal exit) and waits, with a deadline, for every one of those processes
and the driver's /dev/shm/nbdist-* files to go away. The deadline is no promise of speed: it is
generous for a loaded machine, and what the tests pin is that nothing stays for good.
"""

from __future__ import annotations

import glob
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from polling import until

import nbdist
from nbdist.cluster import lifetime

pytestmark = pytest.mark.timeout(120)

EXIT_DEADLINE = 30.0
TOKEN_VAR = "NBDIST_LIFECYCLE_TEST_TOKEN"

DRIVER = textwrap.dedent(
    """
    import sys

    import numpy as np

    import nbdist

    nbdist.init(num_cpus=2)


    @nbdist.remote
    def square(x):
        return x * x


    @nbdist.remote
    class Keeper:
        def __init__(self):
            self.items = []

        def keep(self, item):
            self.items.append(item)
            return len(self.items)


    assert nbdist.get([square.remote(i) for i in range(8)]) == [i * i for i in range(8)]
    keeper = Keeper.remote()
    big = nbdist.put(np.ones(2_000_000))
    assert nbdist.get(keeper.keep.remote(big)) == 1
    squared = square.remote(big)
    assert nbdist.get(squared)[0] == 1.0
    print("READY", flush=True)

    if sys.stdin.readline().strip() == "shutdown":
        nbdist.shutdown()
        print("DOWN", flush=True)
        sys.stdin.readline()
    """
)


def _shm_files() -> set[str]:
    return set(glob.glob("/dev/shm/nbdist-*"))


def _processes() -> dict[int, tuple[int, str, str]]:
    """pid -> (parent pid, state, start time) for every process visible in /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces or parentheses; the fields after it do not.
        fields = stat[stat.rindex(")") + 2 :].split()
        table[int(entry)] = (int(fields[1]), fields[0], fields[19])
    return table


def _descendants(root: int, table: dict[int, tuple[int, str, str]]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _carrying_token(token: str) -> set[int]:
    needle = f"{TOKEN_VAR}={token}".encode()
    pids = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if needle in Path("/proc", entry, "environ").read_bytes().split(b"\0"):
                pids.add(int(entry))
        except OSError:
            continue
    return pids


def _alive(tracked: dict[int, str]) -> dict[int, str]:
    """The tracked processes still running: same start time (no pid reuse), not a zombie."""
    table = _processes()
    return {
        pid: start
        for pid, start in tracked.items()
        if pid in table and table[pid][2] == start and table[pid][1] not in "ZX"
    }


def _command_line(pid: int) -> str:
    try:
        return Path("/proc", str(pid), "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return "?"


@dataclass
class Outcome:
    started: dict[int, str] = field(default_factory=dict)
    survivors: dict[int, str] = field(default_factory=dict)
    commands: dict[int, str] = field(default_factory=dict)
    created_files: set[str] = field(default_factory=set)
    leftover_files: set[str] = field(default_factory=set)

    def note_commands(self, pids) -> None:
        for pid in pids:
            if pid not in self.commands:
                self.commands[pid] = _command_line(pid)

    def describe_survivors(self) -> str:
        alive = "; ".join(f"{pid}: {self.commands.get(pid, '?')}" for pid in self.survivors)
        return f"still running {EXIT_DEADLINE} s later: {alive}"


class Driver:
    def __init__(self, tmp: Path) -> None:
        self.token = uuid.uuid4().hex
        script = tmp / "driver.py"
        script.write_text(DRIVER)
        self.proc = subprocess.Popen(
            [sys.executable, str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, TOKEN_VAR: self.token},
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(
            target=self._pump, args=(self.proc.stdout, self.lines), daemon=True
        ).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    @staticmethod
    def _pump(stream, lines: queue.Queue[str]) -> None:
        for line in stream:
            lines.put(line.rstrip("\n"))

    def _drain_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line)

    def expect(self, wanted: str, timeout: float) -> None:
        def printed() -> bool:
            try:
                return self.lines.get(timeout=0.1) == wanted
            except queue.Empty:
                return False

        if not until(printed, timeout=timeout, interval=0):
            tail = "".join(self.stderr[-40:])
            pytest.fail(f"driver never printed {wanted!r}; exit={self.proc.poll()}\n{tail}")

    def tracked_processes(self) -> dict[int, str]:
        table = _processes()
        pids = _descendants(self.proc.pid, table) | _carrying_token(self.token)
        pids.discard(self.proc.pid)
        return {pid: table[pid][2] for pid in pids if pid in table}

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)


def _left_by(paths: set[str], pids: set[int]) -> set[str]:
    """The files of ``paths`` (named ``nbdist-PID-...``) made by one of ``pids`` or by a process
    that is gone: a cluster another program runs meanwhile on this machine keeps its own."""
    left = set()
    for path in paths:
        pid = os.path.basename(path).split("-")[1]
        if not pid.isdigit() or int(pid) in pids or not lifetime.pid_alive(int(pid)):
            left.add(path)
    return left


def _observe(tmp: Path, how: str) -> Outcome:
    before = _shm_files()
    driver = Driver(tmp)
    outcome = Outcome()
    try:
        driver.expect("READY", timeout=60)
        outcome.started = driver.tracked_processes()
        outcome.note_commands(outcome.started)
        outcome.created_files = _shm_files() - before

        if how == "kill":
            driver.proc.send_signal(signal.SIGKILL)
            driver.proc.wait(timeout=30)
        elif how == "shutdown":
            driver.send("shutdown")
            driver.expect("DOWN", timeout=30)
        elif how == "exit":
            driver.proc.stdin.close()
            assert driver.proc.wait(timeout=30) == 0, "".join(driver.stderr[-40:])

        def all_gone() -> bool:
            tracked = {**outcome.started, **driver.tracked_processes()}
            outcome.note_commands(tracked)
            outcome.survivors = _alive(tracked)
            outcome.leftover_files = _left_by(_shm_files() - before,
                                              set(tracked) | {driver.proc.pid})
            return not outcome.survivors and not outcome.leftover_files

        # Not a failure here: each test below reports the part (processes, files) it pins.
        until(all_gone, timeout=EXIT_DEADLINE, interval=0.05)
        if how == "shutdown":
            assert driver.proc.poll() is None, "the driver should outlive its shutdown()"
        return outcome
    finally:
        driver.close()
        # Whatever outlived the deadline was started by this test: end it, by pid.
        for pid in _alive({**outcome.started, **outcome.survivors}):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture(scope="module")
def stop_local_runtime(cluster_manager) -> None:
    # The pytest process's own cluster would blur the /dev/shm bookkeeping.
    cluster_manager.stop()


@pytest.fixture(scope="module")
def after_kill(tmp_path_factory, stop_local_runtime) -> Outcome:
    return _observe(tmp_path_factory.mktemp("kill"), "kill")


@pytest.fixture(scope="module")
def after_shutdown(tmp_path_factory, stop_local_runtime) -> Outcome:
    return _observe(tmp_path_factory.mktemp("shutdown"), "shutdown")


@pytest.fixture(scope="module")
def after_exit(tmp_path_factory, stop_local_runtime) -> Outcome:
    return _observe(tmp_path_factory.mktemp("exit"), "exit")


def test_killed_driver_takes_every_process_with_it(after_kill: Outcome) -> None:
    # At least a head and a node daemon.
    assert len(after_kill.started) >= 2, after_kill.started
    assert not after_kill.survivors, after_kill.describe_survivors()


@pytest.mark.nbdist_only
def test_killed_driver_leaves_no_shared_memory(after_kill: Outcome) -> None:
    assert after_kill.created_files, "the large put made no /dev/shm/nbdist-* file"
    assert not after_kill.leftover_files, sorted(after_kill.leftover_files)


def test_shutdown_stops_every_process(after_shutdown: Outcome) -> None:
    assert len(after_shutdown.started) >= 2, after_shutdown.started
    assert not after_shutdown.survivors, after_shutdown.describe_survivors()


@pytest.mark.nbdist_only
def test_shutdown_removes_shared_memory(after_shutdown: Outcome) -> None:
    assert after_shutdown.created_files, "the large put made no /dev/shm/nbdist-* file"
    assert not after_shutdown.leftover_files, sorted(after_shutdown.leftover_files)


def test_driver_exiting_without_shutdown_stops_every_process(after_exit: Outcome) -> None:
    assert len(after_exit.started) >= 2, after_exit.started
    assert not after_exit.survivors, after_exit.describe_survivors()


@pytest.mark.nbdist_only
def test_driver_exiting_without_shutdown_removes_shared_memory(after_exit: Outcome) -> None:
    assert after_exit.created_files
    assert not after_exit.leftover_files, sorted(after_exit.leftover_files)


@nbdist.remote
def triple(x: int) -> int:
    return 3 * x


@pytest.fixture
def clean_runtime(no_cluster) -> Iterator[None]:
    assert not nbdist.is_initialized()
    yield


@pytest.mark.usefixtures("clean_runtime")
def test_init_twice_raises_unless_told_to_ignore() -> None:
    nbdist.init(num_cpus=1)
    assert nbdist.is_initialized()
    with pytest.raises(RuntimeError):
        nbdist.init(num_cpus=1)
    nbdist.init(num_cpus=3, ignore_reinit_error=True)
    assert nbdist.cluster_resources()["CPU"] == 1, "ignore_reinit_error replaced the cluster"
    assert nbdist.get(triple.remote(2)) == 6


@pytest.mark.usefixtures("clean_runtime")
def test_remote_call_without_init_starts_a_cluster() -> None:
    assert nbdist.get(triple.remote(5)) == 15
    assert nbdist.is_initialized()


@pytest.mark.usefixtures("clean_runtime")
def test_shutdown_then_init_again() -> None:
    nbdist.init(num_cpus=1)
    assert nbdist.get(triple.remote(1)) == 3
    nbdist.shutdown()
    assert not nbdist.is_initialized()
    nbdist.shutdown()  # a second shutdown is harmless
    nbdist.init(num_cpus=2)
    assert nbdist.cluster_resources()["CPU"] == 2
    assert nbdist.get(triple.remote(2)) == 6


@pytest.mark.nbdist_only
@pytest.mark.usefixtures("no_cluster")
def test_a_new_driver_hears_of_the_node_and_its_initial_workers(wait_until) -> None:
    from nbdist import events

    seen: list = []
    unsubscribe = events.subscribe(seen.extend)

    def of(kind: str, node_id: str) -> list:
        return [e for e in list(seen) if e.kind == kind and e.node_id == node_id]

    try:
        nbdist.init(num_cpus=2)
        node_id = nbdist.get_runtime_context().get_node_id()
        (up,) = wait_until(lambda: of("node_up", node_id=node_id),
                           what="node_up for the local node")
        assert up.resources["CPU"] == 2.0
        workers = wait_until(lambda: len(of("worker_up", node_id=node_id)) >= 2
                             and of("worker_up", node_id=node_id),
                             what="worker_up for both pool workers")
        pids = {w.worker_pid for w in workers}
        assert len(pids) >= 2 and os.getpid() not in pids
        for pid in pids:
            os.kill(pid, 0)  # these are live processes
    finally:
        unsubscribe()
        nbdist.shutdown()


@pytest.mark.usefixtures("no_cluster")
def test_cluster_queries_right_after_init_wait_for_the_head() -> None:
    # The node daemon reports ready before its connection to the head is made; queries sent in
    # that window wait for the head instead of failing.
    for i in range(4):
        nbdist.init(num_cpus=1, namespace=f"early-{i}")
        try:
            assert nbdist.nodes()[0]["Alive"]
            assert nbdist.cluster_resources()["CPU"] == 1.0
        finally:
            nbdist.shutdown()


def test_the_folder_of_a_killed_drivers_cluster_is_removed_by_the_next_cluster(
        tmp_path: Path) -> None:
    # A driver killed with SIGKILL cannot remove its cluster's folder (logs, sockets); its
    # daemons go with it, and the next private cluster started on the machine removes it.
    env = dict(os.environ, TMPDIR=str(tmp_path))
    code = "import nbdist, sys, time; nbdist.init(num_cpus=1); print('READY', flush=True); "
    until_killed = "import threading; threading.Event().wait()"
    killed = subprocess.Popen([sys.executable, "-c", code + until_killed], env=env,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert killed.stdout is not None and killed.stdout.readline().strip() == "READY"
        left = sorted(p.name for p in tmp_path.glob("nbdist-session-*"))
        assert len(left) == 1, left
    finally:
        killed.kill()
        killed.wait(timeout=30)
    assert (tmp_path / left[0]).exists()
    done = subprocess.run([sys.executable, "-c", code + "nbdist.shutdown()"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "READY" in done.stdout, done.stderr
    assert not list(tmp_path.glob("nbdist-session-*")), list(tmp_path.iterdir())


@pytest.mark.usefixtures("no_cluster")
def test_the_event_history_keeps_as_many_records_as_configured(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from nbdist import events

    monkeypatch.setenv("NBDIST_EVENT_BUFFER", "300")
    nbdist.init(num_cpus=1)
    try:
        @nbdist.remote
        def history_tick(i: int) -> int:
            return i

        assert nbdist.get([history_tick.remote(i) for i in range(200)]) == list(range(200))
        kept = events.recent()
        assert len(kept) == 300  # 200 tasks published far more records than that
        assert kept[-1].kind in ("object_freed", "wait_done", "object_created",
                                 "task_finished")
    finally:
        nbdist.shutdown()
    monkeypatch.delenv("NBDIST_EVENT_BUFFER")
    nbdist.init(num_cpus=1)  # the default again for the next cluster
    try:
        assert events.bus()._history.maxlen == 200_000
    finally:
        nbdist.shutdown()


@pytest.mark.usefixtures("no_cluster")
def test_workers_run_at_a_lower_priority_unless_told_not_to(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def where() -> tuple[int, int, str]:
        group = "/proc/self/autogroup"
        text = open(group).read().strip() if os.path.exists(group) else ""
        return os.nice(0), os.getsid(0), text

    mine = os.nice(0)
    monkeypatch.delenv("NBDIST_WORKER_NICE", raising=False)
    nbdist.init(num_cpus=1)  # the default: 5
    try:
        probe = nbdist.remote(where)
        nice, sid, group = nbdist.get(probe.remote())
        node_sid = os.getsid(nbdist.driver.api._local.cluster.node_pid)

        @nbdist.remote
        class Service:
            def where(self) -> tuple[int, int, str]:
                return where()

        actor = nbdist.get(Service.remote().where.remote())  # type: ignore[attr-defined]
    finally:
        nbdist.shutdown()
    assert nice == min(19, mine + 5)
    if group:  # Linux with autogroup: a session of its own, at that nice value
        assert sid != node_sid and group.endswith("nice 5"), (sid, node_sid, group)
    assert actor[:2] == (mine, node_sid)  # an actor keeps the node's priority
    monkeypatch.setenv("NBDIST_WORKER_NICE", "0")
    nbdist.init(num_cpus=1)  # turned off: as the node
    try:
        nice, sid, _ = nbdist.get(nbdist.remote(where).remote())
        node_sid = os.getsid(nbdist.driver.api._local.cluster.node_pid)
    finally:
        nbdist.shutdown()
    assert (nice, sid) == (mine, node_sid)

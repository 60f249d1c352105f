"""``nbdist up`` / ``down`` from a shell and ``nbdist.cluster.ssh`` on three simulated machines:
network namespaces on a bridge, each with its own address and a real sshd (see
tests/sshhosts.py). The notebook's side runs in the root namespace and reaches the hosts only
through their addresses, over SSH and over the cluster's TLS connections. The three hosts are
shared by the module's tests. ``%nbdist up`` in a real kernel, a host powered off while the
cluster runs, and a killed kernel taking its cluster with it are in
tests/jupyter/test_ssh_kernel.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from clusters import NBDIST
from polling import importable_env, until
from sshhosts import CHECKOUT, Hosts, ssh_hosts

import nbdist.cluster
from nbdist.exceptions import ClusterError

pytestmark = [pytest.mark.timeout(300), pytest.mark.nbdist_only]


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosts]:
    with ssh_hosts(3, tmp_path_factory.mktemp("hosts")) as made:
        yield made


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The notebook machine's nbdist state directory (the clusters' folders go there)."""
    path = tmp_path / "state"
    monkeypatch.setenv("NBDIST_STATE_DIR", str(path))
    return path


def _env(state: Path) -> dict[str, str]:
    env = importable_env(dict(os.environ, NBDIST_STATE_DIR=str(state)))
    env.pop("NBDIST_TOKEN", None)
    return env


def _cluster_file(hosts: Hosts, tmp: Path, name: str, key: Path | None = None) -> Path:
    """A Ray on-premise cluster file, with keys nbdist does not use and a resource per host."""
    per_host = ", ".join(f"{h.address}: {{host{i}: 1}}" for i, h in enumerate(hosts, 1))
    path = tmp / f"{name}.yaml"
    path.write_text(textwrap.dedent(f"""\
        cluster_name: {name}
        max_workers: 2
        provider:
          type: local
          head_ip: {hosts[0].address}
          worker_ips: [{hosts[1].address}, {hosts[2].address}]
        auth:
          ssh_user: {hosts.user}
          ssh_private_key: {key or hosts.key}
        available_node_types:
          head: {{resources: {{CPU: 1}}, node_config: {{}}}}
          worker: {{resources: {{CPU: 1}}, node_config: {{}}}}
        head_node_type: head
        head_start_ray_commands: ["ray start --head"]
        setup_commands: ["test -d /proc"]
        nbdist:
          resources: {{{per_host}}}
        """))
    return path


def _nbdist(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([NBDIST, *args], capture_output=True, text=True, timeout=240,
                          env=_env(state))


def _python(state: Path, code: str, env: dict[str, str] | None = None,
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=240, env={**_env(state), **(env or {})})


def _host_folders(name: str) -> list[Path]:
    return list(Path(f"/tmp/nbdist-{os.getuid()}").glob(f"up-{name}-*"))


def _shm_of(pids: set[int]) -> list[str]:
    return [f for f in os.listdir("/dev/shm") if any(f.startswith(f"nbdist-{p}-") for p in pids)]


def _assert_nothing_started(hosts: Hosts, state: Path, name: str) -> None:
    assert until(lambda: not any(h.pids() for h in hosts), timeout=30), \
        [h.process_lines() for h in hosts]
    assert not _host_folders(name)
    assert not (state / f"cluster-{name}").exists()


def _netns_inode(ns: str) -> int:
    return os.stat(f"/run/netns/{ns}").st_ino


def _listening(ns: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "exec", ns, "ss", "-Hltn"], capture_output=True,
                         text=True, timeout=30, check=True).stdout
    return [line.split()[3] for line in out.splitlines()]


# --------------------------------------------------------------------------- up and down
def test_up_from_the_shell_runs_work_on_every_host_and_down_leaves_nothing(
        hosts: Hosts, state: Path, tmp_path: Path) -> None:
    name = f"sh{os.getpid()}"
    file = _cluster_file(hosts, tmp_path, name)
    up = _nbdist(state, "up", str(file))
    daemons: set[int] = set()
    try:
        _check_up_cluster(hosts, state, file, up, daemons)
    finally:
        down = _nbdist(state, "down", str(file))
    assert down.returncode == 0, down.stdout + down.stderr
    assert all(f"{h.address}" in down.stdout for h in hosts), down.stdout
    _assert_nothing_started(hosts, state, name)
    assert not _shm_of(daemons)  # spill files were in the hosts' folders, gone too


def _check_up_cluster(hosts: Hosts, state: Path, file: Path,
                      up: subprocess.CompletedProcess[str], daemons: set[int]) -> None:
    """The cluster is up as the cluster file says; ``daemons`` gets the hosts' processes."""
    assert up.returncode == 0, up.stdout + up.stderr
    # The keys nbdist does not use are named; each host went through every step.
    assert ("(ignored): available_node_types.head.node_config, available_node_types.worker."
            "node_config, head_start_ray_commands, max_workers\n") in up.stdout, up.stdout
    for host in hosts:
        steps = [line.split(None, 1)[1] for line in up.stdout.splitlines()
                 if line.strip().startswith(host.address + " ")]
        kinds = [s.split()[0].rstrip(":") for s in steps]
        assert kinds == ["connecting", "setup", "checking", "starting", "joined"], steps
    record = json.loads((state / f"cluster-{file.stem}" / "cluster.json").read_text())
    head, client = record["head"], record["client"]
    assert (head, client) == (f"{hosts[0].address}:6390", f"{hosts[0].address}:6391")
    # Every daemon listens on its host's address only (no 0.0.0.0, no loopback).
    for host in hosts:
        listening = _listening(host.ns)
        assert listening and all(a.startswith(host.address + ":") for a in listening), listening
    _work_on_every_host(hosts, state, file)
    daemons.update(pid for h in hosts for pid in h.pids())
    assert daemons


def _work_on_every_host(hosts: Hosts, state: Path, file: Path) -> None:
    """From this machine: `nbdist status` and a driver (`nbdist.cluster.attach`, a thin driver)
    find the cluster's token and TLS files by themselves; the driver runs a task on each host,
    passing it a put value. Without the cluster's TLS the head does not answer, even with the
    token."""
    folder = state / f"cluster-{file.stem}"
    head = json.loads((folder / "cluster.json").read_text())["head"]
    seen = _nbdist(state, "status", "--address", head)
    assert seen.returncode == 0 and "3 node(s) alive" in seen.stdout, seen.stdout + seen.stderr
    driver = _python(state, f"""
        import json, os
        import numpy as np
        import nbdist
        import nbdist.cluster
        from nbdist.cluster import standalone
        from nbdist.exceptions import ClusterError

        token = open({str(folder / "token")!r}).read().strip()
        try:
            standalone.head_request({head!r}, bytes.fromhex(token), "nodes", timeout=10)
            print("PLAIN: answered")
        except ClusterError as exc:
            print("PLAIN: refused", exc)

        nbdist.cluster.attach({str(file)!r})

        def on(i):
            @nbdist.remote(resources={{f"host{{i}}": 1}})
            def where(arr):
                return (nbdist.get_runtime_context().get_node_id(),
                        os.stat("/proc/self/ns/net").st_ino, int(arr.sum()))
            return where

        data = nbdist.put(np.ones(2_000_000, dtype=np.uint8))
        print("RAN", json.dumps(nbdist.get([on(i).remote(data) for i in (1, 2, 3)],
                                           timeout=120)))
        nbdist.shutdown()
    """)
    assert driver.returncode == 0, driver.stdout + driver.stderr
    assert "PLAIN: refused" in driver.stdout, driver.stdout
    (ran,) = [json.loads(line[4:]) for line in driver.stdout.splitlines()
              if line.startswith("RAN ")]
    assert [inode for _, inode, _ in ran] == [_netns_inode(h.ns) for h in hosts]
    assert len({node for node, _, _ in ran}) == 3 and all(s == 2_000_000 for _, _, s in ran)


# --------------------------------------------------------------------------- refusals
def test_a_wrong_ssh_key_is_named_and_nothing_starts(hosts: Hosts, state: Path) -> None:
    name = f"key{os.getpid()}"
    seen: list[tuple[str, str]] = []
    with pytest.raises(ClusterError) as caught:
        nbdist.cluster.ssh(head=hosts[0].address, workers=[h.address for h in hosts[1:]],
                           user=hosts.user, key=str(hosts.wrong_key), name=name,
                           progress=lambda host, what: seen.append((host, what)))
    message = str(caught.value)
    for host in hosts:
        assert f"{host.address}: SSH failed" in message, message
    assert "Permission denied (publickey)" in message and str(hosts.wrong_key) in message
    assert "Nothing was started" in message
    assert {what for _, what in seen} == {"connecting"}, seen
    _assert_nothing_started(hosts, state, name)


def test_a_host_with_another_nbdist_version_is_named_and_nothing_starts(
        hosts: Hosts, state: Path, tmp_path: Path) -> None:
    name = f"ver{os.getpid()}"
    file = _cluster_file(hosts, tmp_path, name)
    hosts[1].use_nbdist_version("0.0.9")
    try:
        up = _nbdist(state, "up", str(file))
    finally:
        hosts[1].use_checkout_nbdist()
    assert up.returncode == 1, up.stdout + up.stderr
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert f"{hosts[1].address}: has nbdist 0.0.9 on Python {python}" in up.stderr, up.stderr
    assert hosts[0].address not in up.stderr and hosts[2].address not in up.stderr
    assert "Nothing was started" in up.stderr
    assert "starting" not in up.stdout, up.stdout
    _assert_nothing_started(hosts, state, name)


def _other_python() -> str | None:
    """A Python of another minor version on this machine that runs this checkout's
    ``nbdist --version`` (with this environment's packages on its path)."""
    mine = f"{sys.version_info[0]}.{sys.version_info[1]}"
    found = [shutil.which(f"python3.{m}") for m in range(8, 16)]
    found += sorted(map(str, Path.home().glob(".pyenv/versions/3.*/bin/python3")))
    site = ":".join(p for p in sys.path if p.endswith("site-packages"))
    for python in filter(None, found):
        done = subprocess.run([python, "-m", "nbdist.cli", "--version"], capture_output=True,
                              text=True, timeout=60, cwd="/",
                              env=dict(os.environ, PYTHONPATH=f"{CHECKOUT}:{site}"))
        if done.returncode == 0 and "(Python " in done.stdout and (
                f"(Python {mine}." not in done.stdout):
            return python
    return None


def test_a_host_with_another_python_is_named_and_nothing_starts(
        hosts: Hosts, state: Path, tmp_path: Path) -> None:
    python = _other_python()
    if python is None:
        pytest.skip("no Python of another version on this machine runs nbdist --version")
    name = f"py{os.getpid()}"
    file = _cluster_file(hosts, tmp_path, name)
    hosts[2].use_python(python)
    try:
        up = _nbdist(state, "up", str(file))
    finally:
        hosts[2].use_checkout_nbdist()
    assert up.returncode == 1, up.stdout + up.stderr
    mine = f"{sys.version_info[0]}.{sys.version_info[1]}"
    found = re.search(rf"{re.escape(hosts[2].address)}: has nbdist (\S+) on Python (\d+\.\d+), "
                      rf"this notebook nbdist \S+ on Python {re.escape(mine)}", up.stderr)
    assert found and found[2] != mine, up.stderr
    assert hosts[0].address not in up.stderr and hosts[1].address not in up.stderr
    assert "Nothing was started" in up.stderr and "starting" not in up.stdout, up.stdout
    _assert_nothing_started(hosts, state, name)


def test_up_installs_this_nbdist_from_its_wheel_on_a_host_without_it(
        hosts: Hosts, state: Path, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                            "--no-build-isolation", "--no-index", "-w", str(wheels),
                            str(CHECKOUT)], capture_output=True, text=True, timeout=240)
    assert built.returncode == 0, built.stderr
    name = f"inst{os.getpid()}"
    file = _cluster_file(hosts, tmp_path, name)
    venv = tmp_path / "host2-env"
    hosts[1].use_venv_without_nbdist(venv)
    try:
        without = _nbdist(state, "up", str(file))  # no install option: the host is named
        assert without.returncode == 1, without.stdout + without.stderr
        assert f"{hosts[1].address}: has no `nbdist` command" in without.stderr, without.stderr
        file.write_text(file.read_text() + f"  install: {wheels}\n")
        up = _nbdist(state, "up", str(file))
        try:
            assert up.returncode == 0, up.stdout + up.stderr
            (wheel,) = wheels.glob("nbdist-*.whl")
            steps = [line.split(None, 1)[1] for line in up.stdout.splitlines()
                     if line.strip().startswith(hosts[1].address + " ")]
            assert f"installing nbdist {nbdist.__version__} with pip from {wheel.name}" in steps
            assert not any("installing" in line for line in up.stdout.splitlines()
                           if not line.strip().startswith(hosts[1].address + " "))
            # The node on that host runs the nbdist pip installed there.
            driver = _python(state, f"""
                import nbdist, nbdist.cluster
                nbdist.cluster.attach({str(file)!r})

                @nbdist.remote(resources={{"host2": 1}})
                def where():
                    import sys
                    return nbdist.__file__, sys.executable

                print("RAN", *nbdist.get(where.remote(), timeout=120))
                nbdist.shutdown()
            """)
            assert driver.returncode == 0, driver.stdout + driver.stderr
            (line,) = [x for x in driver.stdout.splitlines() if x.startswith("RAN ")]
            module, executable = line.split()[1:]
            assert module.startswith(str(venv / "lib")) and executable.startswith(str(venv))
        finally:
            down = _nbdist(state, "down", str(file))
        assert down.returncode == 0, down.stdout + down.stderr
    finally:
        hosts[1].use_checkout_nbdist()
    _assert_nothing_started(hosts, state, name)


def test_a_host_that_fails_to_start_is_named_and_up_stops_the_others(
        hosts: Hosts, state: Path, tmp_path: Path) -> None:
    # The third host may not open connections to the head's port (a firewall rule there):
    # its node cannot join, after the head and the second host's node have started.
    name = f"undo{os.getpid()}"
    file = _cluster_file(hosts, tmp_path, name)
    rule = ["ip", "-n", hosts[2].ns, "rule", "add", "ipproto", "tcp", "dport", "6390",
            "prohibit"]
    subprocess.run(rule, check=True, timeout=30)
    try:
        up = _nbdist(state, "up", str(file))
    finally:
        subprocess.run([*rule[:4], "del", *rule[5:]], check=True, timeout=30)
    assert up.returncode == 1, up.stdout + up.stderr
    assert f"Starting nodes failed on {hosts[2].address}:" in up.stderr, up.stderr
    assert "Cannot reach an nbdist head" in up.stderr, up.stderr
    assert (f"Stopped what had started on {hosts[0].address}, {hosts[1].address}."
            in up.stderr), up.stderr
    assert re.search(rf"^\s*{re.escape(hosts[1].address)}\s+joined", up.stdout, re.M), up.stdout
    _assert_nothing_started(hosts, state, name)


# --------------------------------------------------------------------------- python form
def _python_form(hosts: Hosts, name: str, ready: Path) -> str:
    """A script: a ``with nbdist.cluster.ssh(...)`` block, then a cluster from
    ``nbdist.cluster.ssh(...)`` that it holds until it is killed."""
    return textwrap.dedent(f"""
        import time
        import nbdist
        import nbdist.cluster

        @nbdist.remote(resources={{"host": 1}})
        def where():
            return nbdist.get_runtime_context().get_node_id()

        def ssh():
            return nbdist.cluster.ssh(
                head={hosts[0].address!r}, workers={[h.address for h in hosts[1:]]!r},
                user={hosts.user!r}, key={str(hosts.key)!r}, name={name!r},
                resources={{h: {{"host": 1}} for h in {[h.address for h in hosts]!r}}})

        with ssh() as cluster:
            print("NODES", len(cluster.status()["nodes"]),
                  nbdist.get(where.remote(), timeout=120) is not None, flush=True)
        print("AFTER BLOCK", nbdist.is_initialized(), flush=True)
        cluster = ssh()
        print("HELD", nbdist.get(where.remote(), timeout=120) is not None, flush=True)
        open({str(ready)!r}, "w").close()
        # deliberate sleep: the driver stays alive holding the cluster until the test kills it
        time.sleep(600)
        """)


def _run_until_ready(script: str, state: Path, ready: Path) -> subprocess.Popen[str]:
    driver = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=_env(state))
    ok = until(lambda: ready.exists() or driver.poll() is not None, timeout=240)
    if not ok or driver.poll() is not None:
        driver.kill()
        raise AssertionError(driver.communicate())
    return driver


def _kill(driver: subprocess.Popen[str]) -> str:
    driver.kill()
    out, err = driver.communicate(timeout=60)
    return out + err


def test_the_python_form_stops_at_the_end_of_its_block_and_down_from_a_shell_ends_all(
        hosts: Hosts, state: Path, tmp_path: Path) -> None:
    name = f"pyw{os.getpid()}"
    ready = tmp_path / "ready"
    driver = _run_until_ready(_python_form(hosts, name, ready), state, ready)
    try:
        assert all(h.pids() for h in hosts), [h.process_lines() for h in hosts]
        # `nbdist down` from a shell, while the process that holds the cluster still runs:
        # the hosts' daemons and the sessions that held them end.
        down = _nbdist(state, "down", str(_cluster_file(hosts, tmp_path, name)))
        assert down.returncode == 0, down.stdout + down.stderr
        assert until(lambda: not any(h.pids() for h in hosts), timeout=30), \
            [h.process_lines() for h in hosts]
        assert driver.poll() is None
    finally:
        out = _kill(driver)
    assert "NODES 3 True" in out and "AFTER BLOCK False" in out and "HELD True" in out, out
    _assert_nothing_started(hosts, state, name)

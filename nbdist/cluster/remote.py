"""Clusters on other machines, started over SSH: ``nbdist up`` / ``down``, ``%nbdist up``, and
``nbdist.cluster.ssh(...)`` (layer L3).

``up`` goes through four steps, reporting each per host to ``progress``::

    connecting  ssh HOST ...             (BatchMode: a key, never a password prompt)
    checking    the cluster file's setup commands, then `nbdist --version` on the host:
                the notebook's nbdist version and Python major.minor, or nothing starts
                (without setup commands, the first SSH command is `nbdist --version`)
    starting    `nbdist _ssh-host start` (see `ssh_host`) on the head, then on the workers
                in parallel; the host receives its key, certificate, the CA certificate and
                the token through SSH's stdin
    joined      the host's node is registered with the head

The cluster's token and TLS material are made here, in the cluster's folder on this machine
(`folder`: ``<state dir>/cluster-<name>``, mode 0700, with ``cluster.json``, the token, the CA
and the driver's certificate, and SSH's known_hosts for these hosts). Daemons listen on their
host's address from the cluster file, with TLS (certificates of this CA only) and the token.

A host that fails in any step is named with its error; ``up`` then stops what it started on
the others, removes the folder and raises `ClusterError`. ``down`` runs `_ssh-host stop` on
every host (in parallel) and removes the folder; hosts it cannot reach are named, and the folder
stays for a later ``down``.

SSH is the system's ``ssh`` client in a subprocess, one connection per command, so the user's
``~/.ssh/config`` (ProxyJump, ports, agents) applies and nothing lingers after a command. The
one exception is ``up(hold=True)`` (``%nbdist up``, `ssh`): one SSH session per host stays open
(`ssh_host` ``hold``) whose end, when this process closes it or dies, stops that host.

`SSHCluster.attach` makes this process a thin driver (``nbdist://``) through the head's client
server, with the driver's certificate and the token: the notebook's machine need run no node.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nbdist.cluster import cluster_file, lifetime, ssh_host, standalone, tls
from nbdist.cluster.cluster_file import ClusterSpec, load
from nbdist.exceptions import ClusterError

__all__ = ["ClusterSpec", "SSHCluster", "attach", "down", "load", "ssh", "up"]

Progress = Callable[[str, str], None]
SSH_TIMEOUT_S = 30.0
START_TIMEOUT_S = 120.0
_VERSION = re.compile(r"nbdist (\S+) \(Python (\d+)\.(\d+)")


_print_lock = threading.Lock()


def print_progress(host: str, what: str) -> None:
    """One line per step (whole lines: the hosts' threads report at the same time)."""
    with _print_lock:
        sys.stdout.write(f"  {host:<16} {what}\n")
        sys.stdout.flush()


def folder(name: str) -> Path:
    return standalone.state_dir() / f"cluster-{name}"


# --------------------------------------------------------------------------- ssh
class Ssh:
    """Runs commands on the cluster's hosts with the system ``ssh`` client."""

    def __init__(self, spec: ClusterSpec, where: Path) -> None:
        self.spec = spec
        self.known_hosts = where / "known_hosts"

    def argv(self, host: str, command: str) -> list[str]:
        argv = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={SSH_TIMEOUT_S:.0f}",
                "-o", "StrictHostKeyChecking=accept-new",
                "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "LogLevel=ERROR",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=6",
                "-o", "ControlMaster=no", "-o", "ControlPath=none"]
        if self.spec.key:
            argv += ["-i", self.spec.key, "-o", "IdentitiesOnly=yes"]
        if self.spec.user:
            argv += ["-l", self.spec.user]
        return [*argv, host, command]

    def run(self, host: str, command: str, stdin: bytes = b"",
            timeout: float = SSH_TIMEOUT_S * 2) -> str:
        """``command`` on ``host``; its stdout, or `ClusterError` naming the host and why."""
        if shutil.which("ssh") is None:
            raise ClusterError("nbdist up needs the `ssh` command (OpenSSH client) on PATH.")
        try:
            done = subprocess.run(self.argv(host, command), input=stdin, capture_output=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ClusterError(f"{host}: no answer within {timeout:.0f} s to: {command}"
                               ) from None
        err = done.stderr.decode(errors="replace").strip()
        if done.returncode == 255:
            raise ClusterError(f"{host}: SSH failed: {err or 'exit code 255'}. "
                               + self._hint(host, err))
        if done.returncode != 0:
            raise ClusterError(f"{host}: `{command}` failed (exit code {done.returncode})"
                               f"{': ' + err[-1500:] if err else ''}")
        return done.stdout.decode(errors="replace")

    def _hint(self, host: str, err: str) -> str:
        who = f"{self.spec.user}@{host}" if self.spec.user else host
        if "Permission denied" in err:
            key = self.spec.key or "your default SSH key"
            return (f"The host refused the key {key}: check auth.ssh_private_key and that its "
                    f"public key is in ~{self.spec.user or ''}/.ssh/authorized_keys there "
                    f"(try: ssh {'-i ' + key + ' ' if self.spec.key else ''}{who} true).")
        if "Host key verification failed" in err or "HOST IDENTIFICATION" in err:
            return (f"The host's SSH key differs from the one seen at `up` (in "
                    f"{self.known_hosts}); if the host was reinstalled, remove its line there.")
        return f"Check that the host is up and reachable (try: ssh {who} true)."


def _parallel(hosts: list[str], step: Callable[[str], Any]) -> tuple[dict[str, Any],
                                                                       dict[str, str]]:
    """``step`` for every host at once; (results, errors) by host."""
    results: dict[str, Any] = {}
    errors: dict[str, str] = {}
    if not hosts:
        return results, errors
    with ThreadPoolExecutor(max_workers=min(16, len(hosts))) as pool:
        futures = {host: pool.submit(step, host) for host in hosts}
        for host, future in futures.items():
            try:
                results[host] = future.result()
            except (ClusterError, OSError, ValueError) as exc:
                errors[host] = str(exc)
    return results, errors


def _failed(what: str, errors: dict[str, str], after: str) -> ClusterError:
    lines = "\n".join(f"  {host}: {err.removeprefix(host + ': ')}"
                      for host, err in errors.items())
    return ClusterError(f"{what} failed on {', '.join(errors)}:\n{lines}\n{after}")


# --------------------------------------------------------------------------- checks
def local_version() -> tuple[str, str]:
    from nbdist import __version__

    return __version__, f"{sys.version_info[0]}.{sys.version_info[1]}"


def _check(ssh: Ssh, spec: ClusterSpec, host: str, progress: Progress) -> None:
    progress(host, "connecting")
    commands = spec.commands.get(host, [])
    # Without setup commands the first SSH command is the version check itself.
    probe = _nbdist_version(ssh, host) if not commands else ssh.run(host, "true")
    for command in commands:
        progress(host, f"setup: {command}")
        ssh.run(host, command, timeout=START_TIMEOUT_S * 5)
    progress(host, "checking")
    problem = _version_problem(_nbdist_version(ssh, host) if commands else probe)
    if problem and spec.install:
        _install(ssh, spec, host, progress)
        problem = _version_problem(_nbdist_version(ssh, host))
    if problem:
        raise ClusterError(f"{host}: {problem}")


def _install(ssh: Ssh, spec: ClusterSpec, host: str, progress: Progress) -> None:
    """Install this notebook's nbdist version with pip into the host's ``pythonX.Y`` (this
    notebook's Python version): from the package index (``install: true``), or from a wheel
    on this machine (``install: PATH``: the file, or a folder holding this version's wheel),
    copied to the host over SSH first, for hosts without the index."""
    version, python = local_version()
    pip = f"python{python} -m pip install -q"
    if spec.install is True:
        progress(host, f"installing nbdist=={version} with pip")
        ssh.run(host, f"{pip} {shlex.quote('nbdist==' + version)}", timeout=START_TIMEOUT_S * 5)
        return
    wheel = local_wheel(str(spec.install), version)
    progress(host, f"installing nbdist {version} with pip from {wheel.name}")
    target = f".cache/nbdist-wheels/{wheel.name}"  # in the login's home on the host
    ssh.run(host, f"mkdir -p .cache/nbdist-wheels && cat > {shlex.quote(target)}",
            stdin=wheel.read_bytes())
    ssh.run(host, f"{pip} {shlex.quote(target)}", timeout=START_TIMEOUT_S * 5)


def local_wheel(where: str, version: str) -> Path:
    """The wheel of nbdist ``version`` at ``where`` (a .whl file, or a folder holding one)."""
    path = Path(where).expanduser()
    if path.is_dir():
        found = sorted(path.glob(f"nbdist-{version}-*.whl"))
        if not found:
            raise ClusterError(f"nbdist.install: {where} holds no wheel of nbdist {version} "
                               f"(nbdist-{version}-*.whl); build one with `pip wheel --no-deps "
                               f"-w {where} PATH-TO-NBDIST`.")
        return found[-1]
    if not path.is_file() or path.suffix != ".whl":
        raise ClusterError(f"nbdist.install: {where} is not a wheel file (.whl) or a folder "
                           "with one; use true to install from the package index.")
    return path


def _nbdist_version(ssh: Ssh, host: str) -> str | None:
    """What ``nbdist --version`` prints on ``host``; None if it has no nbdist command."""
    try:
        return ssh.run(host, "nbdist --version")
    except ClusterError as exc:
        if "exit code 127" in str(exc):
            return None
        raise


def _version_problem(out: str | None) -> str:
    """What differs between a host's nbdist and Python (``nbdist --version`` there printed
    ``out``) and this machine's ("" if none)."""
    version, python = local_version()
    want = f"nbdist {version} on Python {python}"
    if out is None:
        return (f"has no `nbdist` command on its PATH (this notebook has {want}); install "
                f"it there (pip install nbdist=={version}), add a setup_commands entry, "
                "or set nbdist.install: true in the cluster file.")
    found = _VERSION.search(out)
    if not found:
        return f"`nbdist --version` printed {out.strip()[:200]!r}, not a version."
    theirs, their_python = found[1], f"{found[2]}.{found[3]}"
    if (theirs, their_python) != (version, python):
        return (f"has nbdist {theirs} on Python {their_python}, this notebook {want}. Use "
                f"the same on every host (pip install nbdist=={version} in a Python "
                f"{python} environment there), or set nbdist.install: true.")
    return ""


# --------------------------------------------------------------------------- up / down
def _start_command(spec: ClusterSpec, host: str, head: str) -> str:
    amounts = dict(spec.resources.get(host, {}))
    args = ["nbdist", "_ssh-host", "start", "--cluster", spec.name, "--ip", host]
    if head:
        args += ["--role", "node", "--head", head]
    else:
        args += ["--role", "head", "--port", str(spec.port)]
    for name, flag in (("CPU", "--num-cpus"), ("GPU", "--num-gpus")):
        if name in amounts:
            args += [flag, repr(amounts.pop(name))]
    if amounts:
        args += ["--resources", json.dumps(amounts)]
    return " ".join(shlex.quote(a) for a in args)


def _start_host(ssh: Ssh, spec: ClusterSpec, where: Path, host: str, head: str,
                progress: Progress) -> dict[str, Any]:
    progress(host, "starting " + ("a node" if head else "the head and a node"))
    name = tls.member_name(host)
    files = {"token": (where / "token").read_bytes(), "ca.pem": (where / "ca.pem").read_bytes(),
             "cert.pem": (where / f"{name}.pem").read_bytes(),
             "key.pem": (where / f"{name}.key").read_bytes()}
    out = ssh.run(host, _start_command(spec, host, head), stdin=ssh_host.bundle(files),
                  timeout=START_TIMEOUT_S)
    info: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    progress(host, f"joined (node pid {info['node_pid']})")
    return info


def _stop_host(ssh: Ssh, spec: ClusterSpec, host: str) -> dict[str, Any]:
    command = " ".join(shlex.quote(a) for a in ["nbdist", "_ssh-host", "stop", "--cluster",
                                                 spec.name, "--ip", host])
    info: dict[str, Any] = json.loads(ssh.run(host, command).strip().splitlines()[-1])
    return info


def _prepare(spec: ClusterSpec) -> Path:
    where = folder(spec.name)
    if (where / "cluster.json").exists():
        record = json.loads((where / "cluster.json").read_text())
        held_by = int(record.get("held_by") or 0)
        if not held_by or lifetime.pid_alive(held_by):
            raise ClusterError(f"Cluster {spec.name!r} is already up (head at "
                               f"{record.get('head', '?')}); run `nbdist down` with its "
                               "cluster file first.")
        # The process that held it ended, and with it the cluster on every host it reached.
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(mode=0o700)
    fd = os.open(where / "token", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    tls.make_all(where, spec.name, spec.hosts)
    return where


def _spec(spec: ClusterSpec | str | os.PathLike[str]) -> ClusterSpec:
    return spec if isinstance(spec, ClusterSpec) else cluster_file.load(spec)


def up(spec: ClusterSpec | str | os.PathLike[str], progress: Progress = print_progress,
       hold: bool = False) -> SSHCluster:
    """Start the cluster of a cluster file (or `ClusterSpec`): a head and a node on its head
    host, a node on each worker host, all joined to the head when this returns. ``hold``: the
    cluster also ends when this process does (killed or not): each host keeps an SSH session
    open to it (`ssh_host` ``hold``)."""
    spec = _spec(spec)
    where = _prepare(spec)
    cluster = SSHCluster(spec, where, "")
    starting = False
    try:
        _, errors = _parallel(spec.hosts, lambda h: _check(cluster.ssh, spec, h, progress))
        if errors:
            raise _failed("Checking the hosts", errors, "Nothing was started.")
        starting = True
        head_info = cluster.start(spec.head, "", progress, hold)
        cluster.address, cluster.client = head_info["head"], head_info.get("client", "")
        results, errors = _parallel(
            spec.workers, lambda h: cluster.start(h, cluster.address, progress, hold))
        if errors:
            started = [spec.head, *results]
            raise _failed("Starting nodes", errors,
                          f"Stopped what had started on {', '.join(started)}.")
        cluster.wait_joined()
        (where / "cluster.json").write_text(json.dumps(
            {"name": spec.name, "head": cluster.address, "client": cluster.client,
             "hosts": spec.hosts, "held_by": os.getpid() if hold else 0}, indent=1))
        return cluster
    except BaseException:
        # Every host, not only those known to have started: an interrupt may come while
        # some are starting (a host where nothing runs answers that nothing was found).
        if starting:
            _parallel(spec.hosts, lambda h: _stop_host(cluster.ssh, spec, h))
        cluster.release()
        shutil.rmtree(where, ignore_errors=True)
        raise


def down(spec: ClusterSpec | str | os.PathLike[str],
         progress: Progress = print_progress) -> None:
    """Stop everything ``up`` started for a cluster file (or `ClusterSpec`) on every host and
    remove its files."""
    spec = _spec(spec)
    where = folder(spec.name)
    where.mkdir(mode=0o700, exist_ok=True)
    ssh = Ssh(spec, where)

    def stop(host: str) -> None:
        progress(host, "stopping")
        info = _stop_host(ssh, spec, host)
        progress(host, f"stopped ({len(info['stopped'])} processes)" if info["found"]
                 else "stopped (nothing of this cluster ran there)")

    _, errors = _parallel(spec.hosts, stop)
    if errors:
        raise _failed("Stopping", errors, f"The other hosts are stopped; run `nbdist down` "
                      f"again once {', '.join(errors)} can be reached.")
    shutil.rmtree(where, ignore_errors=True)


def attach(spec: ClusterSpec | str | os.PathLike[str], **kwargs: Any) -> SSHCluster:
    """Make this process the driver of a cluster that ``nbdist up`` (with this cluster file)
    started from this machine; ``kwargs`` go to ``nbdist.init``."""
    spec = _spec(spec)
    where = folder(spec.name)
    try:
        record = json.loads((where / "cluster.json").read_text())
    except (OSError, ValueError):
        raise ClusterError(f"Cluster {spec.name!r} was not brought up from this machine (no "
                           f"{where / 'cluster.json'}); run `nbdist up` with its file first."
                           ) from None
    cluster = SSHCluster(spec, where, record["head"], record.get("client", ""))
    cluster.attach(**kwargs)
    return cluster


class SSHCluster:
    """A cluster ``up`` started: its head's address, token and TLS files; ``attach()`` makes
    this process its driver; ``down()`` (or leaving a ``with`` block) stops it everywhere."""

    def __init__(self, spec: ClusterSpec, where: Path, head: str, client: str = "") -> None:
        self.spec, self.folder, self.address, self.client = spec, where, head, client
        self.ssh = Ssh(spec, where)
        self._holds: list[subprocess.Popen[bytes]] = []

    @property
    def token(self) -> str:
        return (self.folder / "token").read_text().strip()

    @property
    def tls(self) -> dict[str, str]:
        return {"cert": str(self.folder / "driver.pem"), "key": str(self.folder / "driver.key"),
                "ca": str(self.folder / "ca.pem")}

    def start(self, host: str, head: str, progress: Progress, hold: bool) -> dict[str, Any]:
        """Start ``host``'s daemons (a head if ``head`` is ""), then, with ``hold``, the SSH
        session whose end stops them."""
        info = _start_host(self.ssh, self.spec, self.folder, host, head, progress)
        if hold:
            self._hold(host)
        return info

    def _hold(self, host: str) -> None:
        """Open ``host``'s held session and wait until the host says it holds (a process
        killed right after ``up`` returned must still end the cluster)."""
        import select

        command = " ".join(shlex.quote(a) for a in [
            "nbdist", "_ssh-host", "hold", "--cluster", self.spec.name, "--ip", host])
        proc = subprocess.Popen(self.ssh.argv(host, command), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._holds.append(proc)
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], SSH_TIMEOUT_S * 2)
        if not ready or proc.stdout.readline() != b"held\n":
            raise ClusterError(f"{host}: the SSH session that ties the cluster to this process "
                               f"did not open (exit code {proc.poll()}).")

    def release(self) -> None:
        """End the held SSH sessions (each host then stops what still runs there)."""
        for proc in self._holds:
            if proc.stdin is not None:
                proc.stdin.close()
        for proc in self._holds:
            try:
                proc.wait(timeout=SSH_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        self._holds.clear()

    def status(self) -> dict[str, Any]:
        """The nodes as the head knows them (as `nbdist status --json`)."""
        return standalone.status(self.address, self.token, self.tls)

    def wait_joined(self, timeout: float = START_TIMEOUT_S) -> None:
        """Until the head, reached from this machine, lists a live node for every host."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            nodes = self.status()["nodes"]
            if sum(n["alive"] for n in nodes) >= len(self.spec.hosts):
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"Only {sum(n['alive'] for n in nodes)} of "
                                   f"{len(self.spec.hosts)} nodes joined the head at "
                                   f"{self.address} within {timeout:.0f} s.")
            time.sleep(0.2)

    def attach(self, **kwargs: Any) -> dict[str, Any]:
        """Make this process the cluster's driver: a thin driver (``nbdist://``) through the
        head's client server, with the cluster's token and TLS files."""
        import nbdist

        if not self.client:
            raise ClusterError(f"The head of cluster {self.spec.name!r} runs no client server "
                               "for drivers on other machines.")
        standalone.use_tls(self.address, self.tls)
        with _env("NBDIST_TOKEN", self.token):
            info: dict[str, Any] = nbdist.init(f"nbdist://{self.client}", **kwargs)
        return info

    def down(self, progress: Progress = print_progress) -> None:
        """Detach this process if it is attached, and stop the cluster on every host."""
        import nbdist

        if nbdist.is_initialized():
            nbdist.shutdown()
        try:
            down(self.spec, progress)
        finally:
            self.release()

    def __enter__(self) -> SSHCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def __repr__(self) -> str:
        return (f"SSHCluster({self.spec.name!r}, head={self.address}, "
                f"hosts={self.spec.hosts})")


@contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def ssh(head: str, workers: list[str] | tuple[str, ...] = (), *, user: str | None = None,
        key: str | None = None, name: str = "default", port: int = cluster_file.DEFAULT_PORT,
        resources: dict[str, dict[str, float]] | None = None,
        setup_commands: list[str] | None = None, install: bool | str = False,
        attach: bool = True, progress: Progress = print_progress) -> SSHCluster:
    """Start a cluster over SSH (a head and a node on ``head``, a node on each of ``workers``),
    and (``attach``) make this process its driver. Use it as a context manager to stop it at
    the end of the block, or call ``down()``; it also ends when this process does."""
    hosts = [head, *workers]
    spec = ClusterSpec(name=name, head=head, workers=list(workers), user=user, key=key,
                       port=port, resources=dict(resources or {}),
                       commands={h: list(setup_commands or []) for h in hosts},
                       install=install)
    cluster = up(spec, progress, hold=True)
    if attach:
        try:
            cluster.attach()
        except BaseException:
            cluster.down(progress)
            raise
    return cluster

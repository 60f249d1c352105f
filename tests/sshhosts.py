"""Simulated machines reached over SSH, for tests of ``nbdist up`` / ``down`` and of drivers
outside the cluster.

Each host is a Linux network namespace with its own address on a bridge in the root namespace
(which has the address ``<subnet>.254``), running a real sshd (Debian's openssh-server) on port
22 of that address, with a host key of its own and the fixture's public key authorized. A
command run over SSH, and every process it starts, runs in that host's namespace.

The hosts share the machine's file system, /dev/shm and boot id. Their sshd gives each session
``PATH=<host dir>/bin:...`` (``SetEnv``), where ``bin/nbdist`` is this checkout's nbdist, or,
after `Host.use_nbdist_version`, a copy of it that says another version; ``HOME=<host dir>``,
so the login shell reads no start-up file of this machine's user (a ``~/.bashrc`` that runs
``pyenv rehash`` would leave its lock behind when a host is powered off, and stall every
later shell for a minute); and ``NBDIST_SAME_HOST_LINKS=0`` so that objects move between
hosts as bytes through the network (see tests/integration/test_netns.py).

Needs root, ``ip netns`` and /usr/sbin/sshd: `ssh_hosts` skips with the reason otherwise.
Usage::

    with ssh_hosts(3, tmp_path) as hosts:
        hosts[0].address, hosts.key, hosts.wrong_key, hosts[2].power_off()
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from polling import until

SSHD = "/usr/sbin/sshd"
CHECKOUT = Path(__file__).resolve().parent.parent
NBDIST = Path(sys.executable).parent / "nbdist"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {done.stderr.strip()}")
    return done


def netns_pids(ns: str) -> list[int]:
    return [int(p) for p in _ip("netns", "pids", ns, check=False).stdout.split()]


def _reachable(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=2):
            return True
    except OSError:
        return False


@dataclass
class Host:
    ns: str
    address: str
    dir: Path
    sshd: subprocess.Popen[bytes] | None = None

    @property
    def bin(self) -> Path:
        return self.dir / "bin"

    def pids(self) -> list[int]:
        """Every process in this host's namespace but its sshd listener."""
        own = self.sshd.pid if self.sshd is not None else -1
        return [p for p in netns_pids(self.ns) if p != own]

    def process_lines(self) -> list[str]:
        out = []
        for pid in self.pids():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            out.append(f"{pid} {cmd.decode(errors='replace').strip()}")
        return out

    def power_off(self) -> None:
        """As if the machine died: every process in it, sshd included, is killed."""
        until(lambda: _kill_all_in(self.ns), timeout=20, interval=0.05)
        if self.sshd is not None:
            self.sshd.wait(timeout=20)
            self.sshd = None

    def use_nbdist_version(self, version: str) -> None:
        """Make ``nbdist`` on this host a copy of this checkout's that says ``version``."""
        copy = self.dir / f"nbdist-{version}"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(CHECKOUT / "nbdist", copy / "nbdist",
                        ignore=shutil.ignore_patterns("__pycache__", "labextension"))
        init = copy / "nbdist" / "__init__.py"
        text = init.read_text()
        assert '__version__ = "' in text
        start = text.index('__version__ = "')
        end = text.index('"', start + len('__version__ = "'))
        init.write_text(f'{text[:start]}__version__ = "{version}{text[end:]}')
        self._nbdist_script(f'PYTHONPATH={copy} exec {sys.executable} -m nbdist.cli "$@"')

    def use_checkout_nbdist(self) -> None:
        for name in ("nbdist", f"python{sys.version_info[0]}.{sys.version_info[1]}"):
            (self.bin / name).unlink(missing_ok=True)
        self._nbdist_script(f'exec {NBDIST} "$@"')

    def use_python(self, python: str) -> None:
        """Make ``nbdist`` on this host this checkout's, run by ``python`` (another version),
        with this environment's packages on its path (enough for ``nbdist --version``)."""
        site = ":".join(p for p in sys.path if p.endswith("site-packages"))
        self._nbdist_script(f'PYTHONPATH={CHECKOUT}:{site} exec {python} -m nbdist.cli "$@"')

    def use_venv_without_nbdist(self, venv: Path) -> None:
        """Give this host a Python environment of its own at ``venv``, with every package of
        this one but nbdist (pip among them), as this host's ``pythonX.Y``, and as its
        ``nbdist`` the command pip will install there (none until then)."""
        import site
        import venv as venv_mod

        venv_mod.create(venv, with_pip=False, symlinks=True)
        deps = venv.parent / f"{venv.name}-deps"
        deps.mkdir()
        for root in site.getsitepackages():
            for entry in Path(root).iterdir():
                lower = entry.name.lower()
                if lower.startswith(("nbdist", "_nbdist", "__editable__")) or entry.suffix == ".pth":
                    continue
                if not (deps / entry.name).exists():
                    (deps / entry.name).symlink_to(entry)
        (own,) = venv.glob("lib/python*/site-packages")
        (own / "deps.pth").write_text(f"{deps}\n")
        python = f"python{sys.version_info[0]}.{sys.version_info[1]}"
        # A script, not a symlink: Python finds its environment next to the path it was
        # started by, and this host's bin/ is no environment.
        (self.bin / python).unlink(missing_ok=True)
        (self.bin / python).write_text(f'#!/bin/sh\nexec {venv / "bin" / "python"} "$@"\n')
        (self.bin / python).chmod(0o755)
        (self.bin / "nbdist").unlink(missing_ok=True)
        (self.bin / "nbdist").symlink_to(venv / "bin" / "nbdist")  # dangling until installed

    def _nbdist_script(self, line: str) -> None:
        script = self.bin / "nbdist"
        script.write_text(f"#!/bin/sh\n{line}\n")
        script.chmod(0o755)


def _kill_all_in(ns: str) -> bool:
    pids = netns_pids(ns)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return not pids


@dataclass
class Hosts:
    hosts: list[Host]
    key: Path  # authorized on every host
    wrong_key: Path  # authorized nowhere
    user: str = "root"
    bridge: str = ""
    subnet: str = ""
    veths: list[str] = field(default_factory=list)

    def __getitem__(self, i: int) -> Host:
        return self.hosts[i]

    def __iter__(self) -> Iterator[Host]:
        return iter(self.hosts)

    def __len__(self) -> int:
        return len(self.hosts)


def _keygen(path: Path, kind: str = "ed25519") -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True,
                   capture_output=True, timeout=30)


def _sshd_config(host: Host, authorized: Path) -> Path:
    config = host.dir / "sshd_config"
    path = f"{host.bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    config.write_text(f"""\
ListenAddress {host.address}:22
HostKey {host.dir}/ssh_host_ed25519_key
PidFile none
AuthorizedKeysFile {authorized}
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
SetEnv PATH={path} HOME={host.dir} NBDIST_SAME_HOST_LINKS=0
""")
    return config


def _start_sshd(host: Host, authorized: Path) -> None:
    config = _sshd_config(host, authorized)
    log = open(host.dir / "sshd.log", "ab")  # noqa: SIM115 (kept open by the child)
    host.sshd = subprocess.Popen(["ip", "netns", "exec", host.ns, SSHD, "-D", "-e", "-f",
                                  str(config)], stdout=log, stderr=log,
                                 stdin=subprocess.DEVNULL)
    log.close()
    ok = until(lambda: _reachable(host.address, 22) or host.sshd.poll() is not None,
               timeout=30, interval=0.05)
    if not ok or host.sshd.poll() is not None:
        raise RuntimeError(f"sshd in {host.ns} did not start: "
                           f"{(host.dir / 'sshd.log').read_text()[-1500:]}")


def _skip_unless_possible() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("simulated hosts are Linux network namespaces")
    if os.geteuid() != 0:
        pytest.skip("simulated hosts need root (ip netns add)")
    for tool in ("ip", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            pytest.skip(f"simulated hosts need the `{tool}` command")
    if not os.path.exists(SSHD):
        pytest.skip(f"simulated hosts need Debian's openssh-server ({SSHD})")


def _network(hosts: Hosts, tag: str) -> None:
    _ip("link", "add", hosts.bridge, "type", "bridge")
    _ip("addr", "add", f"{hosts.subnet}.254/24", "dev", hosts.bridge)
    _ip("link", "set", hosts.bridge, "up")
    for i, host in enumerate(hosts, 1):
        inside, outside = f"{tag}h{i}", f"{tag}b{i}"
        hosts.veths.append(outside)
        _ip("netns", "add", host.ns)
        _ip("link", "add", inside, "type", "veth", "peer", "name", outside)
        _ip("link", "set", inside, "netns", host.ns)
        _ip("link", "set", outside, "master", hosts.bridge)
        _ip("link", "set", outside, "up")
        _ip("-n", host.ns, "addr", "add", f"{host.address}/24", "dev", inside)
        _ip("-n", host.ns, "link", "set", "lo", "up")
        _ip("-n", host.ns, "link", "set", inside, "up")


def _remove(hosts: Hosts) -> None:
    """Kill what runs on the hosts, then remove what their processes left in the file system
    they share with this machine (nbdist's folders, shared memory), and the network."""
    killed: list[int] = []
    for host in hosts:
        if os.path.exists(f"/run/netns/{host.ns}"):
            killed += netns_pids(host.ns)
            until(lambda ns=host.ns: _kill_all_in(ns), timeout=20, interval=0.05)
            _ip("netns", "del", host.ns, check=False)
        for folder in Path(tempfile.gettempdir(), f"nbdist-{os.getuid()}").glob(
                f"up-*-{host.address}"):
            shutil.rmtree(folder, ignore_errors=True)
    for name in os.listdir("/dev/shm"):
        if any(name.startswith(f"nbdist-{pid}-") for pid in killed):
            with contextlib.suppress(OSError):
                os.unlink(f"/dev/shm/{name}")
    for veth in hosts.veths:
        if _ip("link", "show", veth, check=False).returncode == 0:
            _ip("link", "del", veth, check=False)
    if hosts.bridge and _ip("link", "show", hosts.bridge, check=False).returncode == 0:
        _ip("link", "del", hosts.bridge, check=False)


@contextmanager
def ssh_hosts(count: int, tmp: Path) -> Iterator[Hosts]:
    """``count`` hosts (``<subnet>.1`` ... ``.count``) with sshd running; removed afterwards,
    with every process in them."""
    _skip_unless_possible()
    pid = os.getpid()
    tag = f"nbs{pid % 100000}"
    subnet = f"10.{214 + pid % 30}.{pid // 30 % 250}"
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
    keys = tmp / "client"
    keys.mkdir(parents=True)
    _keygen(keys / "id_ed25519")
    _keygen(keys / "wrong_ed25519")
    authorized = keys / "authorized_keys"
    authorized.write_text((keys / "id_ed25519.pub").read_text())
    hosts = Hosts([], keys / "id_ed25519", keys / "wrong_ed25519", bridge=f"{tag}br",
                  subnet=subnet)
    for i in range(1, count + 1):
        host = Host(f"{tag}n{i}", f"{subnet}.{i}", tmp / f"host{i}")
        host.bin.mkdir(parents=True)
        host.use_checkout_nbdist()
        _keygen(host.dir / "ssh_host_ed25519_key")
        hosts.hosts.append(host)
    _remove(hosts)  # leftovers of an earlier run with this pid
    made = _ip("netns", "add", f"{tag}probe", check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot create a network namespace here: {made.stderr.strip()}")
    _ip("netns", "del", f"{tag}probe", check=False)
    try:
        _network(hosts, tag)
        for host in hosts:
            _start_sshd(host, authorized)
        yield hosts
    finally:
        _remove(hosts)

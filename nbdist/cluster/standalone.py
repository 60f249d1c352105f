"""Clusters that outlive a driver: ``nbdist start --head``, ``start --address``, ``stop``,
``status``, and drivers attaching with ``init(address=...)`` (layer L3).

A machine keeps what ``start`` started in a state directory (``$NBDIST_STATE_DIR``, default
``/tmp/nbdist-<uid>``, mode 0700): one folder per started head or node with ``session.json``
(role, pids, addresses), the cluster's ``token`` (mode 0600) and the daemons' logs. ``stop`` reads
these folders, stops the processes (SIGTERM, then SIGKILL after a grace period), removes their
shared-memory files and the folders. Nothing else on the machine is touched.

The token is the per-cluster secret in hex. ``start --head`` makes it; other machines get it with
``--token`` or ``NBDIST_TOKEN``; on a machine that ran ``start`` it is found in the state
directory. Every connection proves it before anything is unpickled (see `transport`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbdist import config as config_mod
from nbdist.cluster import lifetime
from nbdist.exceptions import ClusterError
from nbdist.wire import protocol as P
from nbdist.wire import transport

DEFAULT_PORT = 6390
DEFAULT_CLIENT_PORT = DEFAULT_PORT + 1  # thin drivers' (nbdist://HOST:PORT, ray://HOST:PORT)
START_TIMEOUT_S = 30.0
STOP_GRACE_S = 5.0


def state_dir() -> Path:
    path = Path(os.environ.get("NBDIST_STATE_DIR") or f"/tmp/nbdist-{os.getuid()}")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def head_address(address: str) -> str:
    """``HOST:PORT`` (or ``tcp:HOST:PORT``, ``unix:/path``) as a transport address."""
    address = address.strip()
    if address.startswith(("tcp:", "unix:")):
        return address
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"Bad cluster address {address!r}: expected HOST:PORT, e.g. "
                         f"127.0.0.1:{DEFAULT_PORT}.")
    return f"tcp:{host or '127.0.0.1'}:{port}"


def display_address(address: str) -> str:
    return address[4:] if address.startswith("tcp:") else address


# --------------------------------------------------------------------------- sessions
@dataclass
class Session:
    """What one ``start`` left on this machine."""

    path: Path
    role: str  # "head" (head + its node) or "node"
    head: str  # the head's transport address
    pids: list[int] = field(default_factory=list)
    node_pid: int = 0
    shm_dir: str = "/dev/shm"
    tls: dict[str, str] = field(default_factory=dict)
    client: str = ""  # a head's client server (thin drivers): its transport address

    @property
    def token(self) -> str:
        return (self.path / "token").read_text().strip()

    def save(self) -> None:
        data = {"role": self.role, "head": self.head, "pids": self.pids,
                "node_pid": self.node_pid, "shm_dir": self.shm_dir, "tls": self.tls,
                "client": self.client}
        tmp = self.path / "session.json.tmp"
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, self.path / "session.json")

    @classmethod
    def load(cls, path: Path) -> Session | None:
        try:
            data = json.loads((path / "session.json").read_text())
        except (OSError, ValueError):
            return None
        return cls(path, data["role"], data["head"], list(data["pids"]),
                   int(data.get("node_pid", 0)), data.get("shm_dir", "/dev/shm"),
                   dict(data.get("tls") or {}), data.get("client", ""))

    def alive(self) -> bool:
        return any(_is_ours(pid) for pid in self.pids)


def sessions() -> list[Session]:
    out = []
    for path in sorted(state_dir().iterdir()):
        if path.is_dir():
            session = Session.load(path)
            if session is not None:
                out.append(session)
    return out


def _is_ours(pid: int) -> bool:
    """True if ``pid`` is a live nbdist daemon (not a reused pid of another program)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
    except OSError:
        return False
    return any(b"nbdist.daemons." + name in cmd for name in (b"head", b"node", b"client_server"))


def find_token(address: str, token: str | None = None) -> bytes:
    """The cluster secret for ``address``: ``token``, else $NBDIST_TOKEN, else the state
    directory of a ``start`` on this machine for that cluster (one still running: an earlier
    cluster at the same address that exited left its own, now useless, token)."""
    text = token or os.environ.get("NBDIST_TOKEN")
    if not text:
        want = head_address(address)
        for session in sessions():
            if (_same_address(session.head, want) and session.alive()
                    and (session.path / "token").exists()):
                text = session.token
                break
    if not text:
        brought_up = up_cluster_folder(address)
        if brought_up is not None:
            text = (brought_up / "token").read_text()
    if not text:
        raise ClusterError(
            f"No token for the cluster at {display_address(head_address(address))}. Pass the "
            "token printed by `nbdist start --head` (--token, or NBDIST_TOKEN in the "
            "environment).")
    try:
        secret = bytes.fromhex(text.strip())
    except ValueError:
        raise ClusterError("The cluster token must be the hex string printed by "
                           "`nbdist start --head`.") from None
    if len(secret) < 16:
        raise ClusterError("The cluster token is too short (expected 64 hex digits).")
    return secret


def up_cluster_folder(address: str) -> Path | None:
    """The folder ``nbdist up`` made on this machine for the cluster whose head (or client
    server) is at ``address``: its token and the driver's TLS files (see `remote`)."""
    want = head_address(address)
    for record in state_dir().glob("cluster-*/cluster.json"):
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(record.read_text())
            if any(data.get(k) and _same_address(head_address(data[k]), want)
                   for k in ("head", "client")):
                return record.parent
    return None


def _same_address(a: str, b: str) -> bool:
    if a == b:
        return True
    if a.startswith("tcp:") and b.startswith("tcp:"):
        ha, _, pa = a[4:].rpartition(":")
        hb, _, pb = b[4:].rpartition(":")
        local = {"127.0.0.1", "localhost", "0.0.0.0", ""}
        return pa == pb and (ha == hb or (ha in local and hb in local))
    return False


def use_tls(address: str | None, tls: dict[str, str] | None = None) -> dict[str, str]:
    """Turn on TLS for this process's TCP connections if the cluster uses it: the paths given
    (``cert``, ``key``, ``ca``), else $NBDIST_TLS_CERT/KEY/CA, else those of a ``start`` on this
    machine for that cluster. Returns what is in use ({} for none)."""
    chosen = {k: v for k, v in (tls or {}).items() if v}
    if not chosen:
        env = {k: os.environ.get(f"NBDIST_TLS_{k.upper()}", "") for k in ("cert", "key", "ca")}
        chosen = {k: v for k, v in env.items() if v}
    if not chosen and address:
        want = head_address(address)
        for session in sessions():
            if session.tls and _same_address(session.head, want):
                chosen = dict(session.tls)
                break
        brought_up = None if chosen else up_cluster_folder(address)
        if brought_up is not None:
            chosen = {"cert": str(brought_up / "driver.pem"),
                      "key": str(brought_up / "driver.key"), "ca": str(brought_up / "ca.pem")}
    if chosen:
        if not chosen.get("cert") or not chosen.get("key"):
            raise ValueError("TLS needs both a certificate and its key (--tls-cert, --tls-key).")
        chosen = {k: os.path.abspath(v) for k, v in chosen.items()}
        try:
            transport.configure_tls(chosen["cert"], chosen["key"], chosen.get("ca", ""))
        except (OSError, ValueError) as exc:
            raise ClusterError(f"Cannot use the TLS files {chosen}: {exc}") from None
    return chosen


def auto_address() -> str:
    """``address="auto"``: the cluster a ``start`` on this machine belongs to."""
    heads = {s.head for s in sessions() if s.alive()}
    if not heads:
        raise ClusterError("address='auto' found no running cluster on this machine; start one "
                           "with `nbdist start --head`, or call init() without an address.")
    if len(heads) > 1:
        raise ClusterError(f"address='auto' found several clusters on this machine "
                           f"({', '.join(sorted(display_address(h) for h in heads))}); pass "
                           "the address.")
    return heads.pop()


# --------------------------------------------------------------------------- head queries
def head_request(address: str, secret: bytes, op: str, args: Any = None,
                 timeout: float = 10.0) -> Any:
    """One query to the head over a fresh authenticated connection."""
    addr = head_address(address)
    try:
        sock = transport.connect(addr, secret, timeout)
    except transport.TransportError as exc:
        raise ClusterError(f"{display_address(addr)}: {exc}.") from None
    except OSError as exc:
        raise ClusterError(f"Cannot reach an nbdist head at {display_address(addr)}: "
                           f"{exc}.") from None
    try:
        sock.settimeout(timeout)
        conn = transport.Connection(sock, lambda m: None, lambda e: None)
        conn.send([(P.HEAD_REQUEST, 1, op, args)])
        while True:
            for frame in conn.recv_blocking():
                for msg in frame:
                    if msg[0] == P.HEAD_REPLY and msg[1] == 1:
                        if not msg[2]:
                            raise ClusterError(f"The head refused {op!r}: {msg[3]}")
                        return msg[3]
    except OSError as exc:
        raise ClusterError(f"The head at {display_address(addr)} did not answer: "
                           f"{exc}.") from None
    finally:
        sock.close()


def pick_local_node(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """A live node on this machine (a driver maps its node's shared memory)."""
    here = lifetime.boot_id()
    local = [n for n in nodes if n.get("alive") and n.get("boot_id") == here]
    if not local:
        where = ", ".join(f"{n.get('hostname', '?')} ({display_address(n.get('address', ''))})"
                          for n in nodes if n.get("alive")) or "none alive"
        raise ClusterError(
            "No node of this cluster runs on this machine (nodes: " + where + "). A driver "
            "needs one: run `nbdist start --address HOST:PORT` here first, or attach as a thin "
            "driver through the head's client server: nbdist.init(\"nbdist://HOST:PORT\") with "
            "the address `nbdist start --head` printed.")
    return min(local, key=lambda n: n.get("node_index", 0))


def node_connect_address(node: dict[str, Any]) -> str:
    local = node.get("local_address") or ""
    if local.startswith("unix:") and os.path.exists(local[5:]):
        return str(local)
    address = str(node["address"])
    if address.startswith("tcp:0.0.0.0:"):
        address = "tcp:127.0.0.1:" + address.rsplit(":", 1)[1]
    return address


# --------------------------------------------------------------------------- start / stop
def _spawn(session_dir: Path, module: str, args: list[str], secret: bytes,
           cfg: config_mod.Config, log_name: str, parent_fd: int = -1,
           ) -> subprocess.Popen[bytes]:
    """Start a daemon detached from the caller; with ``parent_fd`` (the read end of a pipe
    whose write end only the caller holds) it still exits when the caller does, as
    `nbdist.cluster_utils` wants."""
    env = dict(os.environ)
    env["NBDIST_CLUSTER_SECRET"] = secret.hex()
    env["NBDIST_CONFIG"] = json.dumps(cfg.to_dict())
    # These daemons outlive the command that starts them, unless tied to it by parent_fd;
    # PDEATHSIG follows the thread that forks, so it is armed only from the main thread.
    tied = parent_fd >= 0 and threading.current_thread() is threading.main_thread()
    env["NBDIST_DEATHSIG"] = "1" if tied else "0"
    if parent_fd >= 0:
        args = [*args, "--parent-fd", str(parent_fd)]
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(
        [pkg_parent] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.pop("NBDIST_TOKEN", None)
    with open(session_dir / log_name, "ab") as log:
        return subprocess.Popen([sys.executable, "-m", module, *args], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, cwd="/",
                                pass_fds=(parent_fd,) if parent_fd >= 0 else ())


def _wait_ready(proc: subprocess.Popen[bytes], ready: Path, log: Path, what: str) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready.exists():
        if proc.poll() is not None:
            raise ClusterError(f"The {what} exited with code {proc.returncode} while starting."
                               + _tail(log))
        if time.monotonic() > deadline:
            proc.kill()
            raise ClusterError(f"The {what} did not start within {START_TIMEOUT_S:.0f} s."
                               + _tail(log))
        time.sleep(0.01)
    return ready.read_text().strip()


def _tail(log: Path) -> str:
    with contextlib.suppress(OSError):
        text = log.read_text(errors="replace")[-2000:].strip()
        if text:
            return f"\n--- {log} ---\n{text}"
    return ""


def _node_args(listen: list[str], head: str, num_cpus: float | None, num_gpus: float | None,
               resources: dict[str, float] | None, index: int, ready: Path) -> list[str]:
    args: list[str] = []
    for where in listen:
        args += ["--listen", where]
    # 0 is a real value (a head that runs no work): only None means "not given".
    cpus = float(os.cpu_count() or 1) if num_cpus is None else float(num_cpus)
    gpus = 0.0 if num_gpus is None else float(num_gpus)
    args += ["--head", head, "--num-cpus", str(cpus), "--num-gpus", str(gpus),
             "--resources", json.dumps(resources or {}),
             "--node-index", str(index), "--ready-file", str(ready)]
    return args


def _check_resources(resources: dict[str, float] | None, num_cpus: float | None = None,
                     num_gpus: float | None = None,
                     object_store_memory: int | None = None) -> None:
    if resources and ({"CPU", "GPU"} & set(resources)):
        raise ValueError("Pass --num-cpus / --num-gpus, not CPU or GPU in --resources.")
    for name, value in (("--num-cpus", num_cpus), ("--num-gpus", num_gpus)):
        if value is not None and value < 0:
            raise ValueError(f"{name} must be 0 or more, not {value:g}.")
    if resources and any(v < 0 for v in resources.values()):
        raise ValueError(f"--resources must not be negative: {resources}.")
    if object_store_memory is not None and object_store_memory <= 0:
        raise ValueError(f"--object-store-memory must be a positive number of bytes, not "
                         f"{object_store_memory}; leave it out for the default (30% of RAM).")


def _new_session_dir(role: str) -> Path:
    """A fresh folder for one start (several may start in the same millisecond)."""
    stem = state_dir() / f"{role}-{os.getpid()}-{int(time.time() * 1000)}"
    for n in range(1000):
        path = stem.with_name(f"{stem.name}-{n}") if n else stem
        try:
            path.mkdir(mode=0o700)
            return path
        except FileExistsError:
            continue
    raise ClusterError(f"Cannot make a state folder like {stem} (too many exist).")


def _tls_config(tls: dict[str, str]) -> dict[str, str]:
    return {"tls_cert": tls.get("cert", ""), "tls_key": tls.get("key", ""),
            "tls_ca": tls.get("ca", "")}


def start_head(host: str = "127.0.0.1", port: int = DEFAULT_PORT, *,
               num_cpus: float | None = None, num_gpus: float | None = None,
               resources: dict[str, float] | None = None,
               object_store_memory: int | None = None,
               tls: dict[str, str] | None = None, parent_fd: int = -1,
               secret: bytes | None = None, client_port: int | None = None) -> Session:
    """Start a head and a node daemon on this machine, detached from the caller (but ending
    with it when ``parent_fd`` is given: see `_spawn`); ``secret``: the cluster token (default:
    a new one); ``client_port``: where thin drivers attach (default: ``port`` + 1, or a free port
    when ``port`` is 0; -1: no client server)."""
    _check_resources(resources, num_cpus, num_gpus, object_store_memory)
    tls = use_tls(None, tls)
    cfg = config_mod.load({"object_store_memory": object_store_memory, **_tls_config(tls)})
    secret = secret or os.urandom(32)
    session_dir = _new_session_dir("head")
    token_file = session_dir / "token"
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret.hex() + "\n")
    session = Session(session_dir, "head", "", shm_dir=cfg.shm_dir, tls=tls)
    try:
        ready = session_dir / "head.ready"
        head = _spawn(session_dir, "nbdist.daemons.head",
                      ["--listen", f"tcp:{host}:{port}", "--ready-file", str(ready)],
                      secret, cfg, "head.log", parent_fd)
        session.pids.append(head.pid)
        session.save()
        session.head = _wait_ready(head, ready, session_dir / "head.log", "head")
        session.save()
        ready = session_dir / "node.ready"
        node = _spawn(session_dir, "nbdist.daemons.node", _node_args(
            [f"tcp:{host}:0", f"unix:{session_dir}/node.sock"], session.head, num_cpus,
            num_gpus, resources, 1, ready), secret, cfg, "node.log", parent_fd)
        session.pids.append(node.pid)
        session.node_pid = node.pid
        session.save()
        _wait_ready(node, ready, session_dir / "node.log", "node daemon")
        _wait_registered(session.head, secret, node.pid, node, session_dir / "node.log")
        if client_port is None:
            client_port = 0 if port == 0 else port + 1
        if client_port >= 0:
            _start_client_server(session, host, client_port, secret, cfg, parent_fd)
    except BaseException:
        stop_session(session)
        raise
    return session


def _start_client_server(session: Session, host: str, port: int, secret: bytes,
                         cfg: config_mod.Config, parent_fd: int) -> None:
    """Thin drivers' way in (`nbdist.daemons.client_server`), beside the head's node."""
    ready = session.path / "client.ready"
    proc = _spawn(session.path, "nbdist.daemons.client_server",
                  ["--listen", f"tcp:{host}:{port}", "--node", f"unix:{session.path}/node.sock",
                   "--ready-file", str(ready)], secret, cfg, "client.log", parent_fd)
    session.pids.append(proc.pid)
    session.save()
    session.client = _wait_ready(proc, ready, session.path / "client.log", "client server")
    session.save()


def client_session(address: str) -> Session | None:
    """The running ``start --head`` on this machine whose client server is at ``address``."""
    for session in sessions():
        if session.client and _same_address(session.client, address) and session.alive():
            return session
    return None


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
    except (OSError, ValueError):
        return False


def _check_reachable_host(head: str, host: str) -> None:
    """A node listening on loopback can serve only nodes on its own machine: refuse to join a
    head on another machine that way (the other nodes could not reach it), and say which
    ``--host`` would work."""
    if not head.startswith("tcp:") or not _is_loopback(host):
        return
    head_host, port = head[4:].rsplit(":", 1)
    try:
        head_ip = socket.gethostbyname(head_host)
    except OSError:
        return
    if ipaddress.ip_address(head_ip).is_loopback:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.bind((head_ip, 0))
            return  # the head's address is one of this machine's: loopback reaches it
        except OSError:
            pass
        try:
            probe.connect((head_ip, int(port)))
            mine = probe.getsockname()[0]
        except OSError:
            mine = "ADDRESS"
    raise ClusterError(
        f"The head at {display_address(head)} is on another machine, and this node would "
        f"listen on {host} only, which the cluster's other nodes cannot reach. Start it with "
        f"the address of this machine that they can reach, e.g.:\n"
        f"    nbdist start --address {display_address(head)} --host {mine} ...")


def start_node(address: str, *, token: str | None = None, host: str = "127.0.0.1",
               num_cpus: float | None = None, num_gpus: float | None = None,
               resources: dict[str, float] | None = None,
               object_store_memory: int | None = None,
               tls: dict[str, str] | None = None, parent_fd: int = -1) -> Session:
    """Start a node daemon on this machine that joins the cluster whose head is at
    ``address`` (ending with the caller when ``parent_fd`` is given: see `_spawn`)."""
    _check_resources(resources, num_cpus, num_gpus, object_store_memory)
    head = head_address(address)
    tls = use_tls(address, tls)
    secret = find_token(address, token)
    index = int(head_request(head, secret, "alloc_node_index"))  # proves the token first
    _check_reachable_host(head, host)
    cfg = config_mod.load({"object_store_memory": object_store_memory, **_tls_config(tls)})
    session_dir = _new_session_dir("node")
    fd = os.open(session_dir / "token", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret.hex() + "\n")
    session = Session(session_dir, "node", head, shm_dir=cfg.shm_dir, tls=tls)
    try:
        ready = session_dir / "node.ready"
        node = _spawn(session_dir, "nbdist.daemons.node", _node_args(
            [f"tcp:{host}:0", f"unix:{session_dir}/node.sock"], head, num_cpus, num_gpus,
            resources, index, ready), secret, cfg, "node.log", parent_fd)
        session.pids.append(node.pid)
        session.node_pid = node.pid
        session.save()
        _wait_ready(node, ready, session_dir / "node.log", "node daemon")
        _wait_registered(head, secret, node.pid, node, session_dir / "node.log")
    except BaseException:
        stop_session(session)
        raise
    return session


def _wait_registered(head: str, secret: bytes, pid: int, proc: subprocess.Popen[bytes],
                     log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            raise ClusterError(f"The node daemon exited with code {proc.returncode} while "
                               "joining the cluster." + _tail(log))
        nodes = head_request(head, secret, "nodes")
        if any(n.get("pid") == pid and n.get("alive") for n in nodes):
            return
        if time.monotonic() > deadline:
            raise ClusterError("The node daemon did not register with the head in time."
                               + _tail(log))
        time.sleep(0.02)


def stop_session(session: Session, grace: float = STOP_GRACE_S,
                 force: bool = False) -> list[int]:
    """Stop a session's processes (nodes first, then the head) and remove its files;
    ``force``: SIGKILL at once, as ``ray stop --force`` does."""
    stopped = []
    order = sorted(session.pids, key=lambda p: p != session.node_pid)  # the node first
    for pid in order:
        if _is_ours(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL if force else signal.SIGTERM)
                stopped.append(pid)
    deadline = time.monotonic() + grace
    for pid in order:
        while _is_ours(pid) and time.monotonic() < deadline:
            _reap(pid)
            time.sleep(0.02)
        if _is_ours(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            while _is_ours(pid) and not _reap(pid):
                time.sleep(0.01)
        if pid in stopped:  # it may still be exiting (its memory being freed): wait for that
            while _exiting(pid) and not _reap(pid):
                time.sleep(0.01)
    if session.node_pid:
        lifetime.remove_shm_of(session.shm_dir, session.node_pid)
    with contextlib.suppress(OSError):
        for child in session.path.iterdir():
            with contextlib.suppress(OSError):
                child.unlink()
    with contextlib.suppress(OSError):
        session.path.rmdir()
    return stopped


def _exiting(pid: int) -> bool:
    """True while ``pid``, which was one of our daemons, is between its end and becoming a
    zombie (its command line is already gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if f.read():
                return False
    except OSError:
        return False
    return lifetime.process_running(pid)


def _reap(pid: int) -> bool:
    """Collect ``pid`` if it is our child and has exited (the CLI that started it may still be
    running, as in tests); True once it is gone."""
    try:
        got, _ = os.waitpid(pid, os.WNOHANG)
        return got == pid
    except ChildProcessError:
        return not lifetime.pid_alive(pid) or _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def stop_all(address: str | None = None, grace: float = STOP_GRACE_S,
             force: bool = False) -> list[tuple[Session, bool]]:
    """Stop every session (or ``address``'s) and remove its files; for each, whether any of
    its processes still ran. A session whose processes had already exited (killed, or the
    machine rebooted) leaves only files, which go too: it was not stopped."""
    want = head_address(address) if address else None
    done = []
    # Nodes before heads: a node that loses its head first only logs it.
    for session in sorted(sessions(), key=lambda s: s.role != "node"):
        if want is None or _same_address(session.head, want):
            done.append((session, bool(stop_session(session, grace, force))))
    return done


# --------------------------------------------------------------------------- status
def status(address: str | None = None, token: str | None = None,
           tls: dict[str, str] | None = None) -> dict[str, Any]:
    """The cluster's nodes as the head knows them (stable keys; see docs/cluster.md)."""
    if address is None:
        address = auto_address()
    head = head_address(address)
    use_tls(head, tls)
    secret = find_token(head, token)
    nodes = head_request(head, secret, "nodes")
    out_nodes = []
    for n in sorted(nodes, key=lambda n: n.get("node_index", 0)):
        total = {k: v for k, v in n.get("total", {}).items() if not k.startswith("node:")}
        free = {k: v for k, v in n.get("available", {}).items() if not k.startswith("node:")}
        out_nodes.append({
            "node_id": n["node_id"],
            "address": display_address(n.get("address", "")),
            "hostname": n.get("hostname", ""),
            "pid": n.get("pid", 0),
            "alive": bool(n.get("alive")),
            "resources_total": total,
            "resources_free": free,
            "workers": n.get("workers") if isinstance(n.get("workers"), int)
            else len(n.get("workers") or ()),
            "tasks": n.get("tasks", 0),
            "actors": n.get("actors", 0),
            "objects": n.get("objects", 0),
            "object_store_used": n.get("store_used", 0),
            "object_store_capacity": n.get("store_capacity", 0),
            "object_store_spilled": n.get("spilled", 0),
        })
    return {"version": 1, "address": display_address(head), "nodes": out_nodes}


def local_hostname() -> str:
    return socket.gethostname()

"""Starting and stopping the embedded single-machine cluster (layer L3, the local backend).

``start_local`` makes a private session directory (mode 0700) for the Unix sockets and logs,
a fresh 32-byte cluster secret, and a pipe whose write end only the driver holds; then it starts
the head and the node daemon at once as child processes (the secret goes through their
environment, which only the same user can read, and they drop it at start). The node forks its
workers. ``connect`` authenticates to the node and returns the driver's `CoreClient`.

If the driver dies, even by SIGKILL, the pipe's EOF (and PR_SET_PDEATHSIG) stops the daemons,
which kill their workers and remove their shared-memory files. ``stop`` does the same on purpose.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from nbdist import config as config_mod
from nbdist.cluster import lifetime
from nbdist.driver import runtime
from nbdist.exceptions import ClusterError
from nbdist.wire import protocol as P
from nbdist.wire import transport

START_TIMEOUT_S = 30.0


class LocalCluster:
    def __init__(self, cfg: config_mod.Config, num_cpus: float, num_gpus: float,
                 resources: dict[str, float]) -> None:
        self.cfg = cfg
        self.secret = os.urandom(32)
        lifetime.sweep_stale_sessions(tempfile.gettempdir())
        self.session_dir = tempfile.mkdtemp(prefix=lifetime.SESSION_PREFIX)
        os.chmod(self.session_dir, 0o700)
        with open(os.path.join(self.session_dir, lifetime.OWNER_FILE), "w") as f:
            f.write(str(os.getpid()))
        self.head_address = f"unix:{self.session_dir}/head.sock"
        self.node_address = f"unix:{self.session_dir}/node.sock"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.node_pid = 0
        self._pipe_r, self._pipe_w = os.pipe()
        os.set_inheritable(self._pipe_r, True)
        self.num_cpus = num_cpus
        self.num_gpus = num_gpus
        self.resources = resources

    def _spawn(self, module: str, args: list[str], log_name: str) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        env["NBDIST_CLUSTER_SECRET"] = self.secret.hex()
        env["NBDIST_CONFIG"] = json.dumps(self.cfg.to_dict())
        # The children must import this same nbdist, wherever it was imported from.
        pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = os.pathsep.join(
            [pkg_parent] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        # Workers import what the driver can (modules next to a script, test packages ...).
        env["NBDIST_DRIVER_SYS_PATH"] = json.dumps([os.path.abspath(p) for p in sys.path])
        log = open(os.path.join(self.session_dir, log_name), "wb")
        # PDEATHSIG follows the *thread* that forked: armed (by the child) only when that is
        # the main thread; otherwise the pipe alone ties the child to this process.
        main = threading.current_thread() is threading.main_thread()
        env["NBDIST_DEATHSIG"] = "1" if main else "0"
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", module, *args, "--parent-fd", str(self._pipe_r)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                pass_fds=(self._pipe_r,), start_new_session=True)
        finally:
            log.close()
        self.procs.append(proc)
        return proc

    def start(self) -> None:
        lifetime.sweep_stale_shm(self.cfg.shm_dir)
        self._spawn("nbdist.daemons.head", ["--listen", self.head_address], "head.log")
        node_args = ["--listen", self.node_address, "--head", self.head_address,
                     "--num-cpus", str(self.num_cpus), "--num-gpus", str(self.num_gpus),
                     "--resources", json.dumps(self.resources)]
        node = self._spawn("nbdist.daemons.node", node_args, "node.log")
        self.node_pid = node.pid

    def connect(self) -> runtime.CoreClient:
        deadline = time.monotonic() + START_TIMEOUT_S
        path = self.node_address[5:]
        while True:
            for proc in self.procs:
                if proc.poll() is not None:
                    raise ClusterError(self._failure(f"a cluster process exited with code "
                                                     f"{proc.returncode} during start-up"))
            if os.path.exists(path):
                try:
                    sock = transport.connect(self.node_address, self.secret,
                                             self.cfg.handshake_timeout_s)
                    break
                except OSError:
                    pass
            if time.monotonic() > deadline:
                raise ClusterError(self._failure("the node daemon did not start in time"))
            time.sleep(0.002)
        client = hello(sock, P.KIND_DRIVER, self.secret)
        client.close_hint = self._log_tail
        return client

    def _log_tail(self) -> str:
        tail = ""
        for name in ("node.log", "head.log"):
            with contextlib.suppress(OSError), open(os.path.join(self.session_dir, name)) as f:
                text = f.read()[-1500:].strip()
                if text:
                    tail += f"\n--- {name} (end) ---\n{text}"
        return tail

    def _failure(self, what: str) -> str:
        tail = ""
        for name in ("node.log", "head.log"):
            with contextlib.suppress(OSError), open(os.path.join(self.session_dir, name)) as f:
                text = f.read()[-2000:]
                if text.strip():
                    tail += f"\n--- {name} ---\n{text}"
        return f"Could not start the nbdist cluster: {what}.{tail}"

    def stop(self, timeout: float = 5.0) -> None:
        if self._pipe_w >= 0:
            os.close(self._pipe_w)
            self._pipe_w = -1
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.node_pid:
            lifetime.remove_shm_of(self.cfg.shm_dir, self.node_pid)
        if self._pipe_r >= 0:
            os.close(self._pipe_r)
            self._pipe_r = -1
        shutil.rmtree(self.session_dir, ignore_errors=True)


def hello(sock: Any, kind: str, secret: bytes) -> runtime.CoreClient:
    """Introduce this process to a node over an authenticated socket; return its client
    (which proves ``secret``, the cluster's, again when it opens direct links)."""
    conn = transport.Connection(sock, lambda m: None, lambda e: None)
    conn.send([(P.HELLO, P.PROTOCOL_VERSION, kind, os.getpid(), {})])
    frames = conn.recv_blocking()
    msg = frames[0][0]
    if msg[0] != P.WELCOME or msg[1] != P.PROTOCOL_VERSION or "error" in msg[3]:
        sock.close()
        raise ClusterError(f"The node refused this client: {msg[3].get('error', msg)!r}")
    info = dict(msg[3])
    info["client_no"] = msg[2]
    client = runtime.CoreClient(sock, info, kind)
    client.enable_direct(secret)
    return client

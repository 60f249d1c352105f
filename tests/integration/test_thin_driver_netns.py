"""A thin driver in the root namespace drives a cluster on a simulated machine (a network
namespace with its own address, see tests/sshhosts.py) through TLS, and survives the link
going down and up: its connection breaks (TCP keep-alive notices), it redials until the link
is back, and the work it was waiting for arrives, since the client server kept its session
for the grace period.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from clusters import NBDIST
from polling import importable_env
from sshhosts import Hosts, ssh_hosts
from test_security import _certs

pytestmark = [pytest.mark.timeout(240), pytest.mark.nbdist_only]


@pytest.fixture(scope="module")
def far(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Hosts, str, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("thin-far")
    with ssh_hosts(1, tmp) as hosts:
        host = hosts[0]
        cert, key = _certs(tmp, "member")
        tls = {"NBDIST_TLS_CERT": cert, "NBDIST_TLS_KEY": key,
               "NBDIST_TLS_CA": str(tmp / "ca.pem")}
        env = importable_env(dict(os.environ, NBDIST_STATE_DIR=str(tmp / "far-state"),
                                  NBDIST_CLIENT_RECONNECT_GRACE_PERIOD="90", **tls))
        env.pop("NBDIST_TOKEN", None)
        inside = ["ip", "netns", "exec", host.ns, NBDIST]
        try:
            out = subprocess.run([*inside, "start", "--head", "--host", host.address, "--port",
                                  "0", "--num-cpus", "1"], env=env, capture_output=True,
                                 text=True, timeout=120, check=True).stdout
            address = next(x for x in out.splitlines() if "nbdist://" in x).split('"')[1]
            assert address.startswith(f"nbdist://{host.address}:"), address
            (token,) = (tmp / "far-state").glob("head-*/token")
            driver_env = importable_env(dict(
                os.environ, NBDIST_STATE_DIR=str(tmp / "elsewhere"),
                NBDIST_TOKEN=token.read_text().strip(),
                NBDIST_CLIENT_RECONNECT_GRACE_PERIOD="90", **tls))
            yield hosts, address, driver_env
        finally:
            subprocess.run([*inside, "stop"], env=env, capture_output=True, timeout=120)


def _lines(proc: subprocess.Popen[str]) -> queue.Queue[str]:
    out: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.put(line.strip())
        out.put("<eof>")

    threading.Thread(target=read, daemon=True).start()
    return out


def _expect(lines: queue.Queue[str], want: str, timeout: float) -> None:
    got = lines.get(timeout=timeout)
    assert got == want, got


def test_the_link_goes_down_and_up_and_the_driver_carries_on(far, tmp_path: Path) -> None:
    hosts, address, env = far
    gate = tmp_path / "gate"
    code = textwrap.dedent(f"""
        import os, threading
        import numpy as np
        import nbdist
        from nbdist.driver import runtime
        from polling import until

        nbdist.init({address!r})
        conn = runtime.current().conn

        @nbdist.remote
        def later(n):
            until(lambda: os.path.exists({str(gate)!r}), timeout=180)
            return np.ones(n), os.stat("/proc/self/ns/net").st_ino

        ref = later.remote(1_000_000)
        print("submitted", flush=True)

        def watch():
            until(lambda: conn.broken, timeout=180, interval=0.05)
            print("broken", flush=True)

        threading.Thread(target=watch, daemon=True).start()
        value, netns = nbdist.get(ref, timeout=200)
        print("done", float(value.sum()), netns, conn.reconnects, flush=True)
    """)
    driver = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
    link = hosts.veths[0]
    try:
        lines = _lines(driver)
        _expect(lines, "submitted", 120)
        subprocess.run(["ip", "link", "set", link, "down"], check=True, timeout=30)
        _expect(lines, "broken", 120)  # keep-alive gave up on the connection; redialling
        subprocess.run(["ip", "link", "set", link, "up"], check=True, timeout=30)
        gate.touch()
        done = lines.get(timeout=150).split()
    finally:
        subprocess.run(["ip", "link", "set", link, "up"], timeout=30)
        if driver.poll() is None:
            driver.kill()
        driver.wait(30)
    assert done[:2] == ["done", "1000000.0"], (done, driver.stderr and driver.stderr.read())
    assert int(done[2]) == os.stat(f"/run/netns/{hosts[0].ns}").st_ino  # it ran over there
    assert int(done[3]) >= 1

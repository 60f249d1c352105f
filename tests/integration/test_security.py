"""Hostile or broken input to the daemons of a cluster started with `nbdist start`: each bad
connection is dropped with a log line, and the head and the node keep serving everyone else.

The bad inputs: random bytes instead of the handshake, a wrong token, a slow drip that never
finishes the handshake, an oversized frame, a truncated frame, and a frame that is not a pickle,
the last three after a correct handshake (a peer that knows the token but sends garbage).
"""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

import pytest
from clusters import Cli, start_head
from polling import until

from nbdist.wire import transport

pytestmark = [pytest.mark.timeout(120), pytest.mark.nbdist_only]


def _addr(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def _logs(cli: Cli) -> str:
    return "\n".join(p.read_text(errors="replace") for p in cli.state.glob("*/*.log"))


def _token(cli: Cli) -> bytes:
    (path,) = cli.state.glob("head-*/token")
    return bytes.fromhex(path.read_text().strip())


def _drip_dropped(s: socket.socket) -> bool:
    """Send one byte of a handshake that never completes; True once the peer has hung up."""
    try:
        s.sendall(b"x")
        s.settimeout(0.3)
        return s.recv(10) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def _still_serving(cli: Cli, address: str) -> None:
    assert len(cli.status("--address", address)["nodes"]) == 1
    done = cli.python(f"""
        import nbdist
        nbdist.init(address={address!r})
        print(nbdist.get(nbdist.remote(lambda x: x + 1).remote(41)))
    """)
    assert done.returncode == 0 and done.stdout.strip() == "42", done.stderr


def test_bad_connections_are_dropped_and_the_daemons_keep_serving(
        cli: Cli, wait_until) -> None:
    cli.env["NBDIST_HANDSHAKE_TIMEOUT_S"] = "1.0"
    address = start_head(cli, "--num-cpus", "1")
    head = _addr(address)
    node = _addr(cli.status()["nodes"][0]["address"])
    secret = _token(cli)
    expected: list[str] = []

    for target in (head, node):
        # Random bytes where the handshake should be.
        with socket.create_connection(target, timeout=5) as s:
            s.recv(4 + 32)
            s.sendall(os.urandom(200))
            assert s.recv(100) == b""  # dropped
        expected.append("authentication failed")

        # A slow drip: one byte now and then, never a whole handshake. Waited for less than
        # the default handshake timeout (5 s): the 1 s set above is the one that drops it.
        with socket.create_connection(target, timeout=5) as s:
            s.recv(4 + 32)
            dropped = until(lambda s=s: _drip_dropped(s), timeout=4, interval=0)
            assert dropped, "a connection that never authenticates must be dropped"
        expected.append("handshake timed out")

        # Authenticated, then an oversized frame.
        s = transport.connect(f"tcp:{target[0]}:{target[1]}", secret)
        s.sendall(struct.pack("!I", 0x7FFFFFFF) + b"\0" * 64)
        s.settimeout(5)
        assert s.recv(100) == b""
        s.close()
        expected.append("exceeds the limit")

        # Authenticated, then a frame that is not a pickle.
        s = transport.connect(f"tcp:{target[0]}:{target[1]}", secret)
        s.sendall(struct.pack("!I", 16) + os.urandom(16))
        s.settimeout(5)
        assert s.recv(100) == b""
        s.close()
        expected.append("malformed frame")

        # Authenticated, then half a frame and a hang-up.
        s = transport.connect(f"tcp:{target[0]}:{target[1]}", secret)
        s.sendall(struct.pack("!I", 1000) + b"\x80\x05" + b"\0" * 100)
        s.close()
        expected.append("closed in the middle of a frame")

        # The wrong token.
        with pytest.raises(transport.TransportError, match="wrong cluster token"):
            transport.connect(f"tcp:{target[0]}:{target[1]}", b"w" * 32)

        _still_serving(cli, address)

    def logged() -> bool:
        text = _logs(cli)
        return all(text.count(what) >= 2 for what in expected)  # head and node each

    wait_until(logged, timeout=10, what=f"a log line for each bad connection: {expected}")
    assert "dropped connection" in _logs(cli) and "from 127.0.0.1:" in _logs(cli)


def test_default_bind_is_loopback_and_another_address_needs_host(cli: Cli) -> None:
    address = start_head(cli, "--num-cpus", "1")
    assert address.startswith("127.0.0.1:")
    node = cli.status()["nodes"][0]["address"]
    assert node.startswith("127.0.0.1:")
    cli.run("stop")
    address = start_head(cli, "--num-cpus", "1", "--host", "0.0.0.0")
    assert address.startswith("0.0.0.0:")
    _still_serving(cli, address)


def test_state_files_are_private(cli: Cli) -> None:
    start_head(cli, "--num-cpus", "1")
    (session,) = cli.state.glob("head-*")
    # Nothing in them can be reached by other users: the folders are 0700, the token 0600.
    assert cli.state.stat().st_mode & 0o777 == 0o700
    assert session.stat().st_mode & 0o777 == 0o700
    assert Path(session, "token").stat().st_mode & 0o777 == 0o600


def _openssl(*args: str, cwd: Path) -> None:
    import subprocess

    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _certs(tmp: Path, name: str, ca: str = "ca") -> tuple[str, str]:
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    if not (tmp / f"{ca}.pem").exists():
        _openssl("req", "-x509", *ec, "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "2",
                 "-subj", f"/CN=nbdist test {ca}", cwd=tmp)
    _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}",
             cwd=tmp)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", cwd=tmp)
    return str(tmp / f"{name}.pem"), str(tmp / f"{name}.key")


def test_tls_between_nodes_and_drivers(cli: Cli, tmp_path: Path, wait_until) -> None:
    cert, key = _certs(tmp_path, "member")
    ca = str(tmp_path / "ca.pem")
    flags = ["--tls-cert", cert, "--tls-key", key, "--tls-ca", ca]
    address = start_head(cli, "--num-cpus", "1", *flags)
    cli.run("start", "--address", address, "--num-cpus", "1", "--resources", '{"beta": 1}',
            *flags)
    assert len(cli.status()["nodes"]) == 2  # status finds the TLS files of this machine's start

    # On the wire: the head waits for a TLS hello instead of sending its plain greeting.
    with socket.create_connection(_addr(address), timeout=5) as s:
        s.settimeout(0.5)
        with pytest.raises(TimeoutError):
            s.recv(4)
    # A plain client is dropped; so is one whose certificate the cluster's CA did not sign.
    with pytest.raises(OSError):
        transport.connect(f"tcp:{address}", _token(cli))
    other_cert, other_key = _certs(tmp_path, "stranger", ca="otherca")
    refused = cli.run("status", "--json", "--address", address, "--tls-cert", other_cert,
                      "--tls-key", other_key, "--tls-ca", ca, ok=False)
    assert refused.returncode == 1 and "TLS handshake" in refused.stderr
    wait_until(lambda: _logs(cli).count("TLS handshake failed") >= 2, timeout=10,
               what="log lines for the refused TLS connections")

    # A driver (TLS files found from this machine's start) runs work on the other node: the
    # task and its 8 MB argument cross between the nodes over TLS.
    done = cli.python(f"""
        import numpy as np
        import nbdist
        nbdist.init(address={address!r})
        here = nbdist.get_runtime_context().get_node_id()

        @nbdist.remote(resources={{"beta": 1}})
        def total(a):
            return float(a.sum()), nbdist.get_runtime_context().get_node_id()

        arr = np.arange(1_000_000, dtype=np.float64)
        value, node = nbdist.get(total.remote(nbdist.put(arr)))
        assert node != here and value == float(arr.sum()), (node, here, value)
        print("OK")
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "OK"

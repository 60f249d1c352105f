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
import time
from pathlib import Path

import pytest
from clusters import Cli, start_head

from nbdist import transport

pytestmark = [pytest.mark.timeout(120), pytest.mark.nbdist_only]


def _addr(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def _logs(cli: Cli) -> str:
    return "\n".join(p.read_text(errors="replace") for p in cli.state.glob("*/*.log"))


def _token(cli: Cli) -> bytes:
    (path,) = cli.state.glob("head-*/token")
    return bytes.fromhex(path.read_text().strip())


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

        # A slow drip: one byte now and then, never a whole handshake.
        with socket.create_connection(target, timeout=5) as s:
            s.recv(4 + 32)
            deadline = time.monotonic() + 4
            dropped = False
            while time.monotonic() < deadline and not dropped:
                try:
                    s.sendall(b"x")
                    s.settimeout(0.3)
                    dropped = s.recv(10) == b""
                except TimeoutError:
                    continue
                except OSError:
                    dropped = True
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

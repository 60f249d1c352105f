"""Framing and the authenticated handshake, over real sockets, without the cluster."""

from __future__ import annotations

import os
import pickle
import socket
import struct
import threading
import time
from typing import Any

import pytest
from polling import until

from nbdist.wire import poller, server, transport

SECRET = b"s" * 32


def test_frame_reader_splits_and_limits() -> None:
    reader = transport.FrameReader(limit=1000)
    data = transport.encode([("a", 1)]) + transport.encode([("b", 2)])
    assert reader.feed(data[:5]) == []
    assert reader.feed(data[5:]) == [[("a", 1)], [("b", 2)]]
    with pytest.raises(transport.TransportError, match="exceeds"):
        reader.feed(struct.pack("!I", 5000) + b"x")


def test_frame_reader_whole_frames_one_at_a_time() -> None:
    reader = transport.FrameReader(limit=1000)
    for i in range(3):  # each read one whole frame: decoded where it lies
        assert reader.feed(memoryview(transport.encode([("m", i)]))) == [[("m", i)]]
    assert not reader.buf
    big = transport.encode([("x" * 2000,)])
    with pytest.raises(transport.TransportError, match="exceeds"):
        reader.feed(big)


def test_poller_reports_readiness_and_forgets_numbers_closed_behind_its_back() -> None:
    fds = poller.Poller()
    a, b = socket.socketpair()
    try:
        fds.register(a, poller.READ, "a")
        assert fds.select(0) == []
        b.send(b"x")
        assert fds.select(1) == [("a", poller.READ)]
        fds.modify(a, poller.READ | poller.WRITE, "a2")
        assert fds.select(1) == [("a2", poller.READ | poller.WRITE)]
        fds.unregister(a)
        assert fds.select(0) == []
        # A number reused after a close that skipped unregister is registered again.
        fd = a.fileno()
        fds.register(fd, poller.READ, "old")
        a.close()
        c, d = socket.socketpair()
        try:
            fds.register(c, poller.READ, "new")
            d.send(b"y")
            assert fds.select(1) == [("new", poller.READ)]
        finally:
            c.close()
            d.close()
    finally:
        b.close()
        fds.close()


def test_frame_reader_rejects_garbage_and_non_lists() -> None:
    with pytest.raises(transport.TransportError, match="malformed"):
        transport.FrameReader().feed(struct.pack("!I", 4) + b"\xff\xfe\xfd\xfc")
    with pytest.raises(transport.TransportError, match="not a message list"):
        payload = pickle.dumps(("x",))
        transport.FrameReader().feed(struct.pack("!I", len(payload)) + payload)


class EchoServer:
    """A `server.Server` on a Unix socket, answering every message list with itself."""

    def __init__(self, path: str) -> None:
        self.server = server.Server(SECRET, self.on_messages, lambda peer: None,
                                       max_frame=1 << 16, handshake_timeout=0.5)
        self.sock = transport.listen("unix:" + path)
        self.server.add_listener(self.sock)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        self.server.run()

    def on_messages(self, peer: server.Peer, msgs: list[Any]) -> None:
        for m in msgs:
            self.server.send(peer, m)

    def stop(self) -> None:
        self.server.stop()
        # A bare connection wakes the selector so the loop sees the flag.
        waker = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            waker.connect(self.sock.getsockname())
        except OSError:
            pass
        self.thread.join(5)
        waker.close()
        self.server.close()


@pytest.fixture
def echo(tmp_path: Any) -> Any:
    server = EchoServer(str(tmp_path / "s.sock"))
    yield "unix:" + str(tmp_path / "s.sock")
    server.stop()


def _roundtrip(address: str) -> Any:
    sock = transport.connect(address, SECRET)
    got: list[Any] = []
    done = threading.Event()
    conn = transport.Connection(sock, lambda m: (got.extend(m), done.set()), lambda e: None)
    conn.start()
    conn.send([("ping", 1)])
    assert done.wait(5)
    conn.close()
    return got


def test_authenticated_round_trip(echo: str) -> None:
    assert _roundtrip(echo) == [("ping", 1)]


def test_wrong_secret_is_refused_and_server_keeps_serving(echo: str) -> None:
    with pytest.raises(transport.TransportError, match="wrong cluster token"):
        transport.connect(echo, b"x" * 32)
    assert _roundtrip(echo) == [("ping", 1)]


@pytest.mark.parametrize("payload", [
    b"",  # connect and say nothing (slow drip / silence)
    os.urandom(200),  # random bytes instead of the handshake
])
def test_bad_clients_are_dropped(echo: str, payload: bytes) -> None:
    family, addr = transport.parse_address(echo)
    raw = socket.socket(family, socket.SOCK_STREAM)
    raw.connect(addr)
    raw.settimeout(5)
    assert raw.recv(36)[:4] == transport.MAGIC
    if payload:
        raw.sendall(payload)
    start = time.monotonic()
    assert raw.recv(100) == b""  # the server closed this connection
    assert time.monotonic() - start < 5
    raw.close()
    assert _roundtrip(echo) == [("ping", 1)]


def test_oversized_and_malformed_frames_drop_only_that_connection(echo: str) -> None:
    sock = transport.connect(echo, SECRET)
    sock.sendall(struct.pack("!I", 1 << 30))
    sock.settimeout(5)
    assert sock.recv(10) == b""
    sock.close()
    sock = transport.connect(echo, SECRET)
    sock.sendall(struct.pack("!I", 3) + b"\x80\x05X")
    assert sock.recv(10) == b""
    sock.close()
    assert _roundtrip(echo) == [("ping", 1)]


def test_out_of_band_frames_carry_buffers_uncopied_and_split_anywhere() -> None:
    import pickle
    import random

    from nbdist.wire.frames import BIG_FRAME, FrameReader, encode_parts

    rng = random.Random(5)
    big = bytes(rng.getrandbits(8) for _ in range(256)) * (3 * BIG_FRAME // 256 + 7)
    small = b"tiny buffer"
    msgs = [("value", pickle.PickleBuffer(big)), ("other", 1),
            ("small", pickle.PickleBuffer(small))]
    parts = encode_parts(msgs)
    assert len(parts) == 3 and parts[1].nbytes == len(big)  # buffers go as they are
    stream = b"".join(bytes(p) for p in parts) + b"".join(encode_parts([("after", 2)]))
    for trial in range(3):
        reader = FrameReader()
        got: list = []
        pos = 0
        while pos < len(stream):
            direct = reader.direct()
            step = rng.randint(1, 3 * BIG_FRAME // 2) if trial else rng.randint(1, 70_000)
            if direct is not None and trial == 2:  # as the server does: straight into it
                n = min(step, direct.nbytes, len(stream) - pos)
                direct[:n] = stream[pos : pos + n]
                got += reader.received(n)
            else:
                got += reader.feed(stream[pos : pos + step])
                n = step
            pos += n
        assert len(got) == 2
        (value, other, tiny), (after,) = got
        assert bytes(value[1]) == big and other == ("other", 1) and bytes(tiny[1]) == small
        assert after == ("after", 2)


def test_an_adopted_peer_that_closes_during_its_handshake_is_reported_closed() -> None:
    # A node adopts one end of a socketpair for each worker it forks and names the peer at
    # once; a worker killed before its handshake ends must still be reported, or its task waits
    # for ever for a process that is gone.
    closed: list[Any] = []
    srv = server.Server(SECRET, lambda peer, msgs: None, closed.append, handshake_timeout=30)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    peer = srv.adopt(ours)
    peer.info = "a worker"
    stranger = srv.adopt(socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)[0])
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    try:
        theirs.close()  # before sending a byte of the handshake
        assert until(lambda: closed, timeout=5) == [peer]
    finally:
        srv.stop()
        thread.join(5)
        srv.close()
    assert stranger not in closed

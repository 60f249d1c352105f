"""Authenticated point-to-point links between the ranks of one group (a full mesh of TCP
connections).

Set-up: each rank listens on its node's address (never 0.0.0.0) on a port the system picks,
publishes (host, port) through the group's coordinator, and receives the others' with the
group's secret. Rank ``i`` then connects to every rank below it and accepts one connection from
every rank above it, in rank order, so no two ranks wait on each other. Each connection proves
the secret both ways before any frame is read: the dialer sends a nonce, the listener answers
with its own nonce and an HMAC over both, the dialer answers with its HMAC; digests are compared
in constant time. A connection that fails the check is dropped and the listener keeps
accepting until every expected rank is in or the timeout passes; then the listener closes, so
no port stays open while the group runs.

Frames: a fixed header (kind, sequence number, payload length, length of a small JSON ``meta``)
then ``meta`` then the raw payload, received straight into the destination array. Nothing is
unpickled. A rank that fails sends ``ABORT`` frames (with the reason) to every peer before
closing, so a rank waiting on a third one learns why instead of timing out; a peer whose
process died shows up as a closed connection at once.

Threads: the calling thread receives; each link has a sender thread so that a rank can send
to its successor while it receives from its predecessor (a ring step) without either side's
socket buffer filling up and blocking both.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import queue
import secrets
import socket
import struct
import threading
import time
from typing import Any

import numpy as np

from .types import CollectiveTimeoutError, PeerLostError

HELLO = struct.Struct("!8sI32s")  # magic, dialer's rank, dialer's nonce
HEADER = struct.Struct("!BQQH")  # kind, sequence, payload bytes, meta bytes
MAGIC = b"nbdcoll1"
DATA, ABORT = 1, 2
MAX_META = 64 * 1024
SOCKET_BUFFER = 4 * 1024 * 1024


def _mac(secret: bytes, *parts: bytes) -> bytes:
    return hmac.new(secret, b"|".join(parts), hashlib.sha256).digest()


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("connection closed")
        got += n


def _recv_bytes(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    _recv_exact(sock, memoryview(buf))
    return bytes(buf)


class Link:
    """One authenticated connection to one peer rank."""

    def __init__(self, sock: socket.socket, peer: int, timeout: float) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            sock.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER)
        sock.settimeout(timeout)
        self.sock, self.peer, self.timeout = sock, peer, timeout
        self.send_seq = self.recv_seq = 0
        self._outbox: queue.Queue[tuple[bytes, Any] | None] = queue.Queue()
        self._sent = threading.Semaphore(0)
        self._unwaited = 0  # frames posted and not yet waited for (the calling thread's count)
        self._send_error: BaseException | None = None
        self._sender = threading.Thread(target=self._send_loop, daemon=True,
                                        name=f"nbdist-collective-send-{peer}")
        self._sender.start()

    def _send_loop(self) -> None:
        while (item := self._outbox.get()) is not None:
            head, payload = item
            try:
                if self._send_error is None:
                    self.sock.sendall(head)
                    if payload is not None and len(payload):
                        self.sock.sendall(payload)
            except OSError as exc:
                self._send_error = exc
            self._sent.release()

    def _frame(self, kind: int, meta: dict[str, Any], payload: Any) -> tuple[bytes, Any]:
        raw = json.dumps(meta).encode()
        size = 0 if payload is None else memoryview(payload).nbytes
        self.send_seq += 1
        head = HEADER.pack(kind, self.send_seq, size, len(raw)) + raw
        return head, None if payload is None else memoryview(payload).cast("B")

    def post(self, kind: int, meta: dict[str, Any], payload: Any = None) -> None:
        """Queue a frame; `wait_sent` tells when its payload may change again."""
        self._unwaited += 1
        self._outbox.put(self._frame(kind, meta, payload))

    def wait_sent(self, count: int = 1) -> None:
        self._unwaited -= count
        for _ in range(count):
            if not self._sent.acquire(timeout=self.timeout):
                raise CollectiveTimeoutError(
                    f"Sending to rank {self.peer} did not finish within {self.timeout:g} s "
                    f"(is that rank still taking part in the group?).")
        if self._send_error is not None:
            raise PeerLostError(f"The connection to rank {self.peer} broke while sending "
                                f"({self._send_error}): that rank died or left the group.")

    def send(self, kind: int, meta: dict[str, Any], payload: Any = None) -> None:
        """Send a frame and return once it is out. With nothing queued the calling thread
        writes it itself: a hand-over to the sender thread costs two thread switches, which
        is most of the time of a small message on a busy machine."""
        if self._unwaited or self._send_error is not None:
            self.post(kind, meta, payload)
            self.wait_sent()
            return
        head, body = self._frame(kind, meta, payload)
        try:
            self.sock.sendall(head)
            if body is not None and len(body):
                self.sock.sendall(body)
        except TimeoutError:
            raise CollectiveTimeoutError(
                f"Sending to rank {self.peer} did not finish within {self.timeout:g} s "
                f"(is that rank still taking part in the group?).") from None
        except OSError as exc:
            self._send_error = exc
            raise PeerLostError(f"The connection to rank {self.peer} broke while sending "
                                f"({exc}): that rank died or left the group.") from None

    def recv_header(self) -> tuple[int, int, dict[str, Any]]:
        """(kind, payload bytes, meta) of the next frame; its payload must be read next."""
        try:
            kind, seq, size, meta_len = HEADER.unpack(_recv_bytes(self.sock, HEADER.size))
            if meta_len > MAX_META:
                raise ConnectionError(f"frame meta of {meta_len} bytes")
            meta = json.loads(_recv_bytes(self.sock, meta_len))
        except TimeoutError:
            raise CollectiveTimeoutError(
                f"Rank {self.peer} sent nothing for {self.timeout:g} s: it may be stuck, or "
                f"not calling the same collective operation as this rank.") from None
        except (OSError, ValueError) as exc:
            raise PeerLostError(f"The connection to rank {self.peer} closed ({exc}): that "
                                f"rank died or left the group.") from None
        self.recv_seq += 1
        if kind == ABORT:
            raise PeerLostError(f"Rank {self.peer} gave up on the group: {meta.get('reason')}")
        if seq != self.recv_seq:
            raise PeerLostError(f"Frame {seq} from rank {self.peer}, expected {self.recv_seq}.")
        return kind, size, meta

    def recv_payload(self, into: np.ndarray | None, size: int) -> bytes | None:
        """Read the payload of ``size`` bytes into ``into`` (exactly that size), or return it."""
        try:
            if into is None:
                return _recv_bytes(self.sock, size)
            if into.nbytes != size:
                raise PeerLostError(f"Rank {self.peer} sent {size} bytes where {into.nbytes} "
                                    f"were expected.")
            _recv_exact(self.sock, into.data.cast("B"))
            return None
        except TimeoutError:
            raise CollectiveTimeoutError(
                f"Rank {self.peer} stopped sending mid-message for {self.timeout:g} s.") from None
        except OSError as exc:
            raise PeerLostError(f"The connection to rank {self.peer} closed mid-message "
                                f"({exc}): that rank died or left the group.") from None

    def close(self, reason: str | None = None) -> None:
        if reason is not None and self._send_error is None:
            # Through the sender thread, so the frame never interleaves with a payload being
            # sent; best effort and briefly: the peer may be gone already.
            self.post(ABORT, {"reason": reason})
            self._sent.acquire(timeout=1.0)
        self._outbox.put(None)
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sender.join(timeout=5)
        self.sock.close()


def listen(host: str) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.bind((host, 0))
    sock.listen(64)
    return sock


def dial(addr: tuple[str, int], rank: int, peer: int, uid: bytes, secret: bytes,
          timeout: float) -> socket.socket:
    sock = socket.create_connection(addr, timeout=timeout)
    try:
        mine = secrets.token_bytes(32)
        sock.sendall(HELLO.pack(MAGIC, rank, mine))
        theirs = _recv_bytes(sock, 32)
        proof = _recv_bytes(sock, 32)
        if not hmac.compare_digest(proof, _mac(secret, b"L", uid, mine, theirs)):
            raise PeerLostError(f"Rank {peer} at {addr} did not prove the group's secret.")
        sock.sendall(_mac(secret, b"D", uid, theirs, mine))
        return sock
    except BaseException:
        sock.close()
        raise


def _answer(sock: socket.socket, expected: set[int], uid: bytes, secret: bytes) -> int | None:
    """The dialer's rank once it proved the secret, else None (the connection is dropped)."""
    try:
        magic, peer, theirs = HELLO.unpack(_recv_bytes(sock, HELLO.size))
        if magic != MAGIC or peer not in expected:
            return None
        mine = secrets.token_bytes(32)
        sock.sendall(mine + _mac(secret, b"L", uid, theirs, mine))
        proof = _recv_bytes(sock, 32)
        return peer if hmac.compare_digest(proof, _mac(secret, b"D", uid, mine, theirs)) else None
    except (OSError, struct.error):
        return None


def connect_mesh(listener: socket.socket, rank: int, addresses: list[tuple[str, int]],
                 uid: bytes, secret: bytes, timeout: float) -> dict[int, Link]:
    """Links to every other rank (see the module docstring); closes ``listener``."""
    links: dict[int, Link] = {}
    deadline = time.monotonic() + timeout
    try:
        for peer in range(rank):
            try:
                sock = dial(addresses[peer], rank, peer, uid, secret, timeout)
            except OSError as exc:
                raise PeerLostError(f"Could not reach rank {peer} at {addresses[peer]}: {exc}"
                                    ) from None
            links[peer] = Link(sock, peer, timeout)
        expected = set(range(rank + 1, len(addresses)))
        while expected:
            listener.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                raise CollectiveTimeoutError(
                    f"Ranks {sorted(expected)} did not connect within {timeout:g} s.") from None
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            dialer = _answer(sock, expected, uid, secret)
            if dialer is None:
                sock.close()
                continue
            expected.discard(dialer)
            links[dialer] = Link(sock, dialer, timeout)
    except BaseException:
        for link in links.values():
            link.close()
        raise
    finally:
        listener.close()
    return links

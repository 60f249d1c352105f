"""The thin-driver link: a frame stream that survives a dropped connection (layer L2).

A thin driver (`nbdist.driver.thin`) and its relay on the cluster
(`nbdist.daemons.client_server`) talk over one TCP connection (TLS, then the cluster token's
challenge, as every nbdist connection). The messages are the node protocol's
(`nbdist.wire.protocol`) plus the few below. Either side may lose the connection without
losing a message: frames are numbered implicitly (the n-th frame sent after the welcome is
frame n), each side keeps what it sent until the other acknowledges it (``THIN_ACK``), and a
driver that reconnects within the grace period says how many frames it received and hears
how many the relay received; both replay the rest, in order::

    driver                                   relay
      │ THIN_HELLO(version, pid, None) ───────▶ │ new session: a driver on the node
      │ ◀── THIN_WELCOME(version, no, info, 0)  │
      │      ... numbered frames both ways, THIN_ACK now and then ...
      ╳  connection lost                        │ session kept for the grace period
      │ THIN_HELLO(version, pid, (key, got)) ─▶ │
      │ ◀── THIN_WELCOME(..., relay's got)      │ then each side replays what the other lacks

A frame holding only a ``THIN_ACK`` is not numbered and never replayed (acknowledgements are
idempotent; counting them would make acknowledgements of acknowledgements).

`Outbox` and `Inbox` are the bookkeeping of one side; they do no I/O and take their own lock.
"""

from __future__ import annotations

import collections
import contextlib
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

from nbdist.wire.frames import encode_parts

THIN_HELLO = 90  # (THIN_HELLO, version, pid, resume)  resume: None | (session key, frames got)
THIN_WELCOME = 91  # (THIN_WELCOME, version, client_no, info, frames got)  info["error"]: refused
THIN_ACK = 92  # (THIN_ACK, frames got)
THIN_DATA = 93  # (THIN_DATA, oid, offset, parts, size)  a large put's bytes, for the relay to store
THIN_BYE = 94  # (THIN_BYE,)  the driver is done: its work ends now, not after the grace period
THIN_PULL = 95  # (THIN_PULL, oids)  send these values' bytes (a GET_REQ answers with placeholders)

GRACE_S = 30.0  # Ray Client's reconnect grace period
ACK_INTERVAL_S = 0.2  # acknowledge what arrived at least this often

# Ask for an acknowledgement this many frames (or bytes) after the last one at the latest.
ACK_FRAMES = 256
ACK_BYTES = 4 << 20


def grace_period() -> float:
    """Seconds a session waits for its driver to come back: $NBDIST_CLIENT_RECONNECT_GRACE_PERIOD
    (Ray Client's name is RAY_CLIENT_RECONNECT_GRACE_PERIOD), else `GRACE_S`."""
    text = os.environ.get("NBDIST_CLIENT_RECONNECT_GRACE_PERIOD", "")
    try:
        return float(text) if text else GRACE_S
    except ValueError:
        raise ValueError("NBDIST_CLIENT_RECONNECT_GRACE_PERIOD must be a number of seconds, "
                         f"not {text!r}.") from None


def keepalive(sock: socket.socket) -> None:
    """Notice a dead peer within seconds, not the kernel's default of hours."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", 5), ("TCP_KEEPINTVL", 2), ("TCP_KEEPCNT", 3),
                        ("TCP_USER_TIMEOUT", 10_000)):
        if hasattr(socket, name):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


def send_parts(sock: socket.socket, parts: list[Any]) -> None:
    for part in parts:
        sock.sendall(part)


def is_ack(msgs: list[Any]) -> bool:
    return len(msgs) == 1 and type(msgs[0]) is tuple and msgs[0][0] == THIN_ACK


def ack_frame(n: int) -> list[Any]:
    return encode_parts([(THIN_ACK, n)])


class Outbox:
    """Frames sent and not yet acknowledged, with what to do when they are (``on_ack``: a
    relay gives back the node's arena ranges a frame read from)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sent = 0
        self._frames: collections.deque[tuple[int, list[Any], Callable[[], None] | None]] = (
            collections.deque())

    def add(self, parts: list[Any], on_ack: Callable[[], None] | None = None) -> None:
        with self._lock:
            self.sent += 1
            self._frames.append((self.sent, parts, on_ack))

    def ack(self, n: int) -> None:
        done = []
        with self._lock:
            frames = self._frames
            while frames and frames[0][0] <= n:
                done.append(frames.popleft()[2])
        for fn in done:
            if fn is not None:
                fn()

    def unacked(self) -> list[list[Any]]:
        with self._lock:
            return [parts for _, parts, _ in self._frames]

    def drop_all(self) -> None:
        """Run every ``on_ack`` (the session ends: nothing will be replayed)."""
        self.ack(1 << 62)


class Inbox:
    """Frames received, and whether an acknowledgement is due."""

    def __init__(self) -> None:
        self.received = 0
        self.acked = 0
        self._bytes = 0
        self.due = threading.Event()

    def frame(self) -> None:
        self.received += 1
        if self.received - self.acked == ACK_FRAMES:
            self.due.set()

    def bytes_in(self, n: int) -> None:
        """``n`` more bytes arrived (a large frame is counted as it arrives); says once that
        an acknowledgement is due when they pass `ACK_BYTES`, not at every read."""
        before = self._bytes
        self._bytes = before + n
        if before < ACK_BYTES <= self._bytes:
            self.due.set()

    def take_ack(self) -> int | None:
        """The count to acknowledge now, if any is new."""
        n = self.received
        if n == self.acked:
            return None
        self.acked = n
        self._bytes = 0
        return n

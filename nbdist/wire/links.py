"""Direct links: a framed, authenticated socket between two processes of one node (layer L2).

A driver calls an actor on its own node over a link of its own to the actor's worker, instead
of through the node daemon (see `direct`): a call then crosses two processes instead of four.

    actor worker: Endpoint  listens on <node's socket directory>/w<pid>.sock (mode 0600)
    driver:       connect() ──mutual HMAC challenge (transport)──▶ accept thread
                  LINK_HELLO(actor id) ──▶  ◀── LINK_WELCOME(ok, pid)
                  then frames both ways, read by the thread that reads the process's node
                  connection (`transport.Connection.add_extra`)

Both ends prove the cluster's secret before anything is unpickled, exactly like a connection to
a node; the hello names the actor, so a socket left behind by a dead worker whose pid was
reused cannot take another actor's calls. A link that closes, or sends a malformed frame, is
closed and reported to its owner once (``on_close``); it never takes the process down.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

from nbdist.wire import protocol as P
from nbdist.wire import transport
from nbdist.wire.frames import DEFAULT_MAX_FRAME, FrameReader, TransportError, encode

log = logging.getLogger(__name__)

HANDSHAKE_S = 5.0
_UCRED = struct.Struct("3i")  # SO_PEERCRED: pid, uid, gid


def endpoint_path(sock_dir: str, pid: int) -> str:
    return os.path.join(sock_dir, f"w{pid}.sock")


def socket_dir(info: dict[str, Any]) -> str:
    """Where a node's workers listen for links: beside the node's own Unix socket (a private
    directory); "" when the node has none (no links then)."""
    local = str(info.get("local_address") or "")
    return os.path.dirname(local[5:]) if local.startswith("unix:") else ""


class Link:
    """One end of a direct link. Any thread may `send`; the thread reading the process's node
    connection reads it (`read`) and delivers message lists to ``on_messages``."""

    def __init__(self, sock: socket.socket, on_messages: Callable[[list[Any]], None],
                 on_close: Callable[[Link], None], peer_pid: int = 0,
                 max_frame: int = DEFAULT_MAX_FRAME) -> None:
        sock.setblocking(True)
        self.sock = sock
        self.peer_pid = peer_pid
        self._on_messages = on_messages
        self._on_close = on_close
        self._reader = FrameReader(max_frame)
        self._buf = bytearray(1 << 16)
        self.send_lock = threading.Lock()
        self._close_lock = threading.Lock()
        self.closed = False

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, msgs: list[Any]) -> None:
        """Raises OSError (TransportError) if the link is closed or breaks."""
        with self.send_lock:
            self.send_held(msgs)

    def send_held(self, msgs: list[Any]) -> None:
        """`send`, by a caller that holds ``send_lock`` (to order its sends with other work)."""
        if self.closed:
            raise TransportError("the link is closed")
        self.sock.sendall(encode(msgs))

    def read(self) -> bool:
        """Read what arrived and deliver it; False once the link is closed."""
        if self.closed:
            return False
        try:
            n = self.sock.recv_into(self._buf)
        except OSError:
            n = 0
        if not n:
            self.close()
            return False
        try:
            frames = self._reader.feed(memoryview(self._buf)[:n])
        except TransportError as exc:
            log.warning("nbdist: closing a direct link from pid %s: %s", self.peer_pid, exc)
            self.close()
            return False
        for msgs in frames:
            self._on_messages(msgs)
        return True

    def close(self) -> None:
        """Close it and tell the owner (once, whoever notices first)."""
        with self._close_lock:
            if self.closed:
                return
            self.closed = True
        # shutdown, not close: another thread may be selecting on the descriptor; it sees
        # EOF, and the descriptor is released when the socket object goes.
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self._on_close(self)


def _recv_frame(sock: socket.socket) -> list[Any]:
    reader = FrameReader(1 << 16)
    while True:
        data = sock.recv(1 << 16)
        if not data:
            raise TransportError("the link closed during its hello")
        frames = reader.feed(data)
        if frames:
            return frames[0]


def connect(sock_dir: str, pid: int, actor_id: int, secret: bytes,
            timeout: float = HANDSHAKE_S) -> socket.socket:
    """Open a link to the worker ``pid`` that hosts ``actor_id``; raises OSError if there is
    no such endpoint, or the worker there hosts another actor (TransportError)."""
    sock = transport.connect(f"unix:{endpoint_path(sock_dir, pid)}", secret, timeout)
    try:
        sock.settimeout(timeout)
        sock.sendall(encode([(P.LINK_HELLO, actor_id)]))
        answer = _recv_frame(sock)[0]
        if answer[0] != P.LINK_WELCOME or not answer[1]:
            raise TransportError(f"worker {pid} does not host actor {actor_id:x}")
        sock.settimeout(None)
    except BaseException:
        sock.close()
        raise
    return sock


class Endpoint:
    """An actor worker's listening socket and its accept thread: each caller that proves the
    secret and names this worker's actor gets a `Link`, handed to ``on_link``."""

    def __init__(self, sock_dir: str, secret: bytes, actor_id: int,
                 on_link: Callable[[socket.socket, int], None]) -> None:
        self.path = endpoint_path(sock_dir, os.getpid())
        self.secret = secret
        self.actor_id = actor_id
        self.on_link = on_link
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        os.chmod(self.path, 0o600)
        self.sock.listen(64)
        self.closed = False
        threading.Thread(target=self._accept_loop, name="nbdist-link-accept",
                         daemon=True).start()

    def _accept_loop(self) -> None:
        while not self.closed:
            try:
                sock, _ = self.sock.accept()
            except OSError:
                return
            try:
                transport.server_handshake(sock, self.secret, HANDSHAKE_S)
                hello = _recv_frame(sock)[0]
                ok = hello[0] == P.LINK_HELLO and hello[1] == self.actor_id
                sock.sendall(encode([(P.LINK_WELCOME, ok, os.getpid())]))
                if not ok:
                    raise TransportError(f"a link asked for actor {hello[1]!r}")
                sock.settimeout(None)
                cred = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
                self.on_link(sock, _UCRED.unpack(cred)[0])
            except (OSError, TransportError, IndexError, TypeError) as exc:
                log.warning("nbdist: refused a direct link: %s", exc)
                sock.close()

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)

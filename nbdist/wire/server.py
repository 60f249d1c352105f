"""The server side of authenticated framed connections (layer L2): `Server`, the
single-threaded selector loop of the node daemon and the head, and `Peer`, one connection it
accepted. The handshake and the frames are those of `nbdist.wire.transport`: the server accepts,
authenticates without blocking (TLS first when configured), reads frames, calls
``on_messages(peer, msgs)``, and at the end of each loop iteration writes every peer's queued
messages as one frame, so bursts batch naturally.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import heapq
import hmac
import itertools
import logging
import os
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any

from nbdist.wire import transport
from nbdist.wire.frames import DEFAULT_MAX_FRAME, FrameReader, encode_parts
from nbdist.wire.poller import READ, WRITE, Poller

log = logging.getLogger("nbdist.wire.transport")


class Peer:
    """One accepted connection inside a `Server`."""

    __slots__ = (
        "sock", "fd", "reader", "outbox", "wq", "authed", "nonce", "hbuf", "deadline",
        "closed", "info", "id", "want_write", "tls_pending", "__weakref__",
    )

    def __init__(self, sock: socket.socket, max_frame: int, pid: int,
                 alloc: Callable[[int], memoryview] | None = None) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.reader = FrameReader(max_frame, alloc)
        self.outbox: list[Any] = []
        self.wq: collections.deque[memoryview] = collections.deque()  # bytes to write
        self.authed = False
        self.tls_pending = False  # a TLS handshake to finish before anything else
        self.nonce = b""
        self.hbuf = bytearray()
        self.deadline = 0.0
        self.closed = False
        self.info: Any = None
        self.id = pid
        self.want_write = False

    def send(self, msg: Any) -> None:
        self.outbox.append(msg)


class Server:
    """Single-threaded selector loop serving authenticated peers (see the module docstring)."""

    def __init__(
        self,
        secret: bytes,
        on_messages: Callable[[Peer, list[Any]], None],
        on_close: Callable[[Peer], None],
        max_frame: int = DEFAULT_MAX_FRAME,
        handshake_timeout: float = 5.0,
    ) -> None:
        self.secret = secret
        self.on_messages = on_messages
        self.on_close = on_close
        self.max_frame = max_frame
        self.handshake_timeout = handshake_timeout
        self.sel = Poller()
        self.peers: dict[int, Peer] = {}
        self.listeners: list[socket.socket] = []
        self.timers: list[tuple[float, int, Callable[[], None]]] = []
        self._timer_seq = 0
        self.dirty: set[Peer] = set()
        self._rbuf = bytearray(transport.RECV_BYTES)
        self._rview = memoryview(self._rbuf)
        self.running = True
        self._next_peer_id = 1
        self.on_iteration: Callable[[], None] | None = None
        # Memory for the buffers of large out-of-band frames (see FrameReader).
        self.alloc: Callable[[int], memoryview] | None = None
        # `stop` may be called from a signal handler: a byte on this pipe ends the select
        # (Python retries a select that a handled signal interrupted).
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.sel.register(self._wake_r, READ, ("fd", self._drain_wake))

    def _drain_wake(self) -> None:
        with contextlib.suppress(OSError):
            os.read(self._wake_r, 4096)

    # -- registration --
    def add_listener(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.listeners.append(sock)
        self.sel.register(sock, READ, ("listen", sock))

    def add_reader(self, fd: int, callback: Callable[[], None]) -> None:
        self.sel.register(fd, READ, ("fd", callback))

    def remove_reader(self, fd: int) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(fd)

    def adopt(self, sock: socket.socket, authed: bool = False) -> Peer:
        """Serve an already-connected socket (e.g. one end of a socketpair to a worker)."""
        sock.setblocking(False)
        peer = Peer(sock, self.max_frame, self._next_peer_id, self.alloc)
        self._next_peer_id += 1
        self.peers[peer.fd] = peer
        self.sel.register(sock, READ, ("peer", peer))
        if authed:
            peer.authed = True
        elif isinstance(sock, ssl.SSLSocket) and sock.server_side:
            peer.tls_pending = True
            self._arm_handshake_timeout(peer)
            self._tls_step(peer)
        else:
            self._start_handshake(peer)
        return peer

    def _tls_step(self, peer: Peer) -> None:
        sock = peer.sock
        assert isinstance(sock, ssl.SSLSocket)
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self._want_write(peer, False)
            return
        except ssl.SSLWantWriteError:
            self._want_write(peer, True)
            return
        except (ssl.SSLError, OSError) as exc:
            self.drop(peer, f"TLS handshake failed: {exc}")
            return
        peer.tls_pending = False
        self._want_write(peer, False)
        self._start_handshake(peer)

    def _want_write(self, peer: Peer, want: bool) -> None:
        if peer.want_write != want:
            peer.want_write = want
            events = READ | (WRITE if want else 0)
            with contextlib.suppress(KeyError, ValueError):
                self.sel.modify(peer.sock, events, ("peer", peer))

    def call_later(self, delay: float, fn: Callable[[], None]) -> None:
        self._timer_seq += 1
        heapq.heappush(self.timers, (time.monotonic() + delay, self._timer_seq, fn))

    # -- sending --
    def send(self, peer: Peer, msg: Any) -> None:
        if peer.closed:
            return
        peer.outbox.append(msg)
        self.dirty.add(peer)

    def flush(self) -> None:
        dirty = self.dirty
        self.dirty = set()
        for peer in dirty:
            if peer.closed or not peer.outbox:
                continue
            if not peer.authed:
                # Queued before the handshake finished: sent once it has.
                continue
            msgs = peer.outbox
            peer.outbox = []
            wq = peer.wq
            for part in encode_parts(msgs):
                wq.append(memoryview(part).cast("B"))
            self._write(peer)

    def _write(self, peer: Peer) -> None:
        if peer.tls_pending:
            self._tls_step(peer)
            return
        wq = peer.wq
        tls = isinstance(peer.sock, ssl.SSLSocket)
        try:
            while wq:
                if len(wq) == 1 or tls:
                    n = peer.sock.send(wq[0])
                else:
                    n = peer.sock.sendmsg(list(itertools.islice(wq, 0, transport._IOV_MAX)))
                while n:
                    head = wq[0]
                    if n >= head.nbytes:
                        n -= head.nbytes
                        wq.popleft()
                    else:
                        wq[0] = head[n:]
                        n = 0
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            if not peer.want_write:
                peer.want_write = True
                self.sel.modify(peer.sock, READ | WRITE, ("peer", peer))
            return
        except OSError:
            self.drop(peer, "write failed")
            return
        if peer.want_write:
            # Drained: stop asking for writability (only then: it is a system call).
            peer.want_write = False
            with contextlib.suppress(KeyError, ValueError):
                self.sel.modify(peer.sock, READ, ("peer", peer))

    # -- the loop --
    def run(self) -> None:
        while self.running:
            timeout = None
            if self.timers:
                timeout = max(0.0, self.timers[0][0] - time.monotonic())
            events = self.sel.select(timeout)
            for (kind, obj), mask in events:
                if kind == "peer":
                    if mask & WRITE:
                        self._write(obj)
                    if mask & READ:
                        self._read(obj)
                elif kind == "listen":
                    self._accept(obj)
                else:
                    obj()
            now = time.monotonic()
            while self.timers and self.timers[0][0] <= now:
                _, _, fn = heapq.heappop(self.timers)
                fn()
            if self.on_iteration is not None:
                self.on_iteration()
            self.flush()

    def stop(self) -> None:
        self.running = False
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def _accept(self, lsock: socket.socket) -> None:
        while True:
            try:
                sock, _ = lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    log.error("nbdist: out of file descriptors, refusing a connection")
                return
            if sock.family == socket.AF_INET:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if transport._tls_server is not None:
                    sock.setblocking(False)
                    sock = transport._tls_server.wrap_socket(sock, server_side=True,
                                                   do_handshake_on_connect=False)
            self.adopt(sock)

    def _start_handshake(self, peer: Peer) -> None:
        peer.nonce = os.urandom(transport.NONCE)
        peer.wq.append(memoryview(transport.MAGIC + peer.nonce))
        self._write(peer)
        if not peer.deadline:
            self._arm_handshake_timeout(peer)

    def _arm_handshake_timeout(self, peer: Peer) -> None:
        peer.deadline = time.monotonic() + self.handshake_timeout

        def expire() -> None:
            if not peer.authed and not peer.closed:
                self.drop(peer, "handshake timed out")

        self.call_later(self.handshake_timeout, expire)

    def _read(self, peer: Peer) -> None:
        if peer.tls_pending:
            self._tls_step(peer)
            return
        self._read_once(peer)
        sock = peer.sock
        if isinstance(sock, ssl.SSLSocket):
            # Bytes TLS already decrypted do not wake select: take them now.
            while not peer.closed and sock.pending():
                self._read_once(peer)

    def _read_once(self, peer: Peer) -> None:
        data: bytes | memoryview
        direct = peer.reader.direct()
        if direct is not None:  # the rest of a large frame: straight into its buffer
            try:
                n = peer.sock.recv_into(direct)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError,
                    ssl.SSLWantWriteError):
                return
            except OSError:
                n = 0
            if not n:
                self.drop(peer, "closed in the middle of a frame")
                return
            for msgs in peer.reader.received(n):
                if not peer.closed:
                    self.on_messages(peer, msgs)
            return
        try:
            n = peer.sock.recv_into(self._rbuf)
            data = self._rview[:n]
        except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return
        except OSError:
            data = b""
        if not data:
            reason = None
            if not peer.authed:
                reason = "closed during the handshake"
            elif peer.reader.buf or peer.reader.big is not None:
                reason = "closed in the middle of a frame"
            self.drop(peer, reason)
            return
        if not peer.authed:
            data = self._handshake_data(peer, data)
            if not data:
                return
        try:
            frames = peer.reader.feed(data)
        except Exception as exc:
            self.drop(peer, f"{exc}")
            return
        for msgs in frames:
            if peer.closed:
                return
            self.on_messages(peer, msgs)

    def _handshake_data(self, peer: Peer, data: bytes | memoryview) -> bytes:
        peer.hbuf += data
        if len(peer.hbuf) < transport.NONCE + 32:
            return b""
        client_nonce = bytes(peer.hbuf[:transport.NONCE])
        digest = bytes(peer.hbuf[transport.NONCE : transport.NONCE + 32])
        rest = bytes(peer.hbuf[transport.NONCE + 32 :])
        peer.hbuf = bytearray()
        if not hmac.compare_digest(digest, transport._digest(self.secret, b"C", peer.nonce, client_nonce)):
            self.drop(peer, "authentication failed (wrong cluster token)")
            return b""
        peer.authed = True
        peer.wq.append(memoryview(transport._digest(self.secret, b"S", client_nonce, peer.nonce)))
        self._write(peer)
        if peer.outbox:
            self.dirty.add(peer)
        return rest

    def drop(self, peer: Peer, reason: str | None) -> None:
        if peer.closed:
            return
        peer.closed = True
        if reason:
            where = ""
            with contextlib.suppress(OSError):
                name = peer.sock.getpeername()
                if isinstance(name, tuple):
                    where = f" from {name[0]}:{name[1]}"
            log.warning("nbdist: dropped connection %s%s: %s", peer.id, where, reason)
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(peer.sock)
        self.peers.pop(peer.fd, None)
        with contextlib.suppress(OSError):
            peer.sock.close()
        self.dirty.discard(peer)
        # An authenticated peer, or one its owner already knows (``info`` set when it adopted
        # it: a worker it forked ends its handshake first, and may be killed during it).
        if peer.authed or peer.info is not None:
            self.on_close(peer)

    def close(self) -> None:
        for peer in list(self.peers.values()):
            with contextlib.suppress(OSError):
                peer.sock.close()
        for sock in self.listeners:
            with contextlib.suppress(OSError):
                sock.close()
        with contextlib.suppress(Exception):
            self.sel.close()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

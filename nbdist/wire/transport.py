"""Authenticated framed connections (layer L2).

Addresses are ``unix:/path`` or ``tcp:host:port``. Every connection begins with a mutual
challenge-response over the per-cluster secret; nothing is unpickled before it succeeds::

    server -> client   MAGIC + server_nonce (32 bytes)
    client -> server   client_nonce (32) + HMAC(secret, b"C" + server_nonce + client_nonce)
    server -> client   HMAC(secret, b"S" + client_nonce + server_nonce)

Digests are compared with `hmac.compare_digest`. A wrong digest, a handshake slower than the
configured timeout, an oversized or malformed frame drops that one connection (with a log line);
the server keeps serving the others.

After it, a frame is a 4-byte big-endian length plus a pickled list of messages. Messages that
carry `pickle.PickleBuffer` objects (large values moving between nodes) go as an *out-of-band*
frame, flagged by the length's top bit: ``[pickle length (4)][buffer count (4)][buffer lengths
(8 each)][pickle][buffers]``. The sender writes the buffers straight from where they are
(``sendmsg``; no copy into the frame), and the receiver reads a large frame straight into one
buffer of its final size and unpickles with views into it, so a value crosses with the kernel's
copies and one more.

Two users of frames:

* `Connection`: a client endpoint (driver, worker, node -> head). Any thread may `send`; one
  reader thread delivers incoming message lists to a handler.
* `Server`: a single-threaded selector loop (node daemon, head). It accepts, authenticates
  without blocking, reads frames, calls ``on_messages(peer, msgs)``, and at the end of each loop
  iteration writes every peer's queued messages as one frame, so bursts batch naturally.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import hashlib
import heapq
import hmac
import itertools
import logging
import os
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

from nbdist.daemons.poller import READ, WRITE, Poller
from nbdist.wire.frames import DEFAULT_MAX_FRAME, FrameReader, TransportError, encode, encode_parts

log = logging.getLogger(__name__)

MAGIC = b"NBD1"
NONCE = 32
RECV_BYTES = 1 << 20
_IOV_MAX = 512
QUIET_S = 0.002


def _digest(secret: bytes, tag: bytes, a: bytes, b: bytes) -> bytes:
    return hmac.new(secret, tag + a + b, hashlib.sha256).digest()


def parse_address(address: str) -> tuple[int, Any]:
    if address.startswith("unix:"):
        return socket.AF_UNIX, address[5:]
    if address.startswith("tcp:"):
        host, _, port = address[4:].rpartition(":")
        return socket.AF_INET, (host, int(port))
    raise ValueError(f"Bad address {address!r}: expected 'unix:/path' or 'tcp:host:port'.")


def listen(address: str) -> socket.socket:
    family, addr = parse_address(address)
    sock = socket.socket(family, socket.SOCK_STREAM)
    if family == socket.AF_INET:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(addr)
    if family == socket.AF_UNIX:
        os.chmod(addr, 0o600)
    sock.listen(256)
    return sock


def bound_address(sock: socket.socket) -> str:
    if sock.family == socket.AF_UNIX:
        return "unix:" + sock.getsockname()
    host, port = sock.getsockname()[:2]
    return f"tcp:{host}:{port}"


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise TransportError("connection closed during the handshake")
        buf += chunk
    return bytes(buf)


def client_handshake(sock: socket.socket, secret: bytes, timeout: float = 5.0) -> None:
    sock.settimeout(timeout)
    hello = _recv_exact(sock, len(MAGIC) + NONCE)
    if hello[: len(MAGIC)] != MAGIC:
        raise TransportError("the peer is not an nbdist endpoint")
    server_nonce = hello[len(MAGIC) :]
    client_nonce = os.urandom(NONCE)
    sock.sendall(client_nonce + _digest(secret, b"C", server_nonce, client_nonce))
    try:
        answer = _recv_exact(sock, 32)
    except TransportError:
        raise TransportError(
            "the cluster refused the connection: wrong cluster token"
        ) from None
    if not hmac.compare_digest(answer, _digest(secret, b"S", client_nonce, server_nonce)):
        raise TransportError("the server failed to prove the cluster token")
    sock.settimeout(None)


def server_handshake(sock: socket.socket, secret: bytes, timeout: float = 5.0) -> None:
    """The accepting side of the challenge on a blocking socket (a `Server` does it without
    blocking); raises TransportError or OSError if the peer does not prove the secret."""
    sock.settimeout(timeout)
    nonce = os.urandom(NONCE)
    sock.sendall(MAGIC + nonce)
    answer = _recv_exact(sock, NONCE + 32)
    client_nonce, digest = answer[:NONCE], answer[NONCE:]
    if not hmac.compare_digest(digest, _digest(secret, b"C", nonce, client_nonce)):
        raise TransportError("authentication failed (wrong cluster token)")
    sock.sendall(_digest(secret, b"S", client_nonce, nonce))
    sock.settimeout(None)


# ------------------------------------------------------------------------------------- TLS
# Optional, for TCP between machines (Unix sockets and worker socketpairs never use it). With a
# CA, both sides must present a certificate it signed; the token handshake runs inside TLS.
_tls_client: ssl.SSLContext | None = None
_tls_server: ssl.SSLContext | None = None


def configure_tls(cert: str, key: str, ca: str = "") -> None:
    """Use TLS for every TCP connection this process makes or accepts from now on."""
    global _tls_client, _tls_server
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.minimum_version = ssl.TLSVersion.TLSv1_2
    server.load_cert_chain(cert, key)
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.minimum_version = ssl.TLSVersion.TLSv1_2
    client.load_cert_chain(cert, key)
    # Cluster members are addressed by IP: the CA, not the host name, says who belongs.
    client.check_hostname = False
    if ca:
        server.load_verify_locations(ca)
        server.verify_mode = ssl.CERT_REQUIRED
        client.load_verify_locations(ca)
        client.verify_mode = ssl.CERT_REQUIRED
    else:
        client.verify_mode = ssl.CERT_NONE
    _tls_client, _tls_server = client, server


def tls_enabled() -> bool:
    return _tls_client is not None


def connect(address: str, secret: bytes, timeout: float = 5.0) -> socket.socket:
    family, addr = parse_address(address)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(addr)
        if family == socket.AF_INET:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if _tls_client is not None:
                try:
                    sock = _tls_client.wrap_socket(sock)
                except ssl.SSLError as exc:
                    raise TransportError(f"TLS handshake with {address} failed: {exc}") from None
        try:
            client_handshake(sock, secret, timeout)
        except ssl.SSLError as exc:
            # With TLS 1.3 a refused client certificate shows up at the first read.
            raise TransportError(f"TLS handshake with {address} failed: {exc}") from None
    except BaseException:
        sock.close()
        raise
    return sock


class Connection:
    """Client side of a frame connection: thread-safe sends, one reader thread."""

    def __init__(
        self,
        sock: socket.socket,
        on_messages: Callable[[list[Any]], None],
        on_close: Callable[[BaseException | None], None],
        name: str = "nbdist-conn",
        max_frame: int = DEFAULT_MAX_FRAME,
    ) -> None:
        self.sock = sock
        self._on_messages = on_messages
        self._on_close = on_close
        self._send_lock = threading.Lock()
        self._reader = FrameReader(max_frame)
        self._rbuf = bytearray(RECV_BYTES)
        self.read_lock = threading.Lock()
        self._borrowers = 0
        self._reading = False
        self._borrow_lock = threading.Lock()
        self._resume = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        # Other sockets read by whichever thread reads this one (`add_extra`); a byte on the
        # second pipe tells that thread the set changed.
        self.extra: list[Any] = []
        self.watch_extra = False
        self._extra_r, self._extra_w = os.pipe()
        os.set_blocking(self._extra_r, False)
        self.closed = False
        self._thread = threading.Thread(target=self._read_loop, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def send(self, msgs: list[Any]) -> None:
        data = encode(msgs)
        with self._send_lock:
            if self.closed:
                raise TransportError("the connection to the nbdist cluster is closed")
            self.sock.sendall(data)

    def recv_blocking(self) -> list[list[Any]]:
        """Read frames on the calling thread (only before `start`)."""
        while True:
            data = self._recv()
            if not data:
                raise TransportError("connection closed")
            frames = self._reader.feed(data)
            if frames:
                return frames

    def _recv(self) -> memoryview:
        # Into a reused buffer: a fresh large bytes object per read costs an mmap/munmap.
        n = self.sock.recv_into(self._rbuf)
        if n and isinstance(self.sock, ssl.SSLSocket):
            # Bytes TLS already decrypted do not wake select: take them now.
            while n < len(self._rbuf) and self.sock.pending():
                n += self.sock.recv_into(memoryview(self._rbuf)[n:])
        return memoryview(self._rbuf)[:n]

    def add_extra(self, reader: Any) -> None:
        """Also read ``reader`` (an object with ``fileno()`` and ``read() -> bool``, such as a
        `links.Link`) whenever this connection is read; it leaves the set itself
        (`remove_extra`) when it closes."""
        with self._borrow_lock:
            self.extra = [*self.extra, reader]
        with contextlib.suppress(OSError):
            os.write(self._extra_w, b"x")

    def remove_extra(self, reader: Any) -> None:
        with self._borrow_lock:
            self.extra = [r for r in self.extra if r is not reader]

    def _read_extra(self, ready: list[Any]) -> None:
        for r in ready:
            if r is self._extra_r:
                with contextlib.suppress(OSError):
                    os.read(self._extra_r, 4096)
            elif r is not self.sock and r is not self._wake_r:
                r.read()

    def pump(self, timeout: float | None) -> bool:
        """Read and deliver what arrives within ``timeout`` (None: until something does), on
        the calling thread; only for connections whose reader thread is not started, by one
        thread at a time (``read_lock``). Returns False once the connection is closed.

        With extra readers (or ``watch_extra`` set: some may be added meanwhile) they are
        read too, before this socket: what a direct link says before a reply that came
        another way is delivered first."""
        if self.closed:
            return False
        if self.extra or self.watch_extra:
            ready, _, _ = select.select([self.sock, self._extra_r, *self.extra], [], [],
                                        timeout)
            self._read_extra(ready)
            if self.sock not in ready:
                return not self.closed
        else:
            ready, _, _ = select.select([self.sock], [], [], timeout)
            if not ready:
                return True
        data: bytes | memoryview
        try:
            data = self._recv()
        except OSError as exc:
            data = b""
            error: BaseException | None = exc
        else:
            error = None
        if not data:
            if not self.closed:
                self.closed = True
                self._on_close(error)
            return False
        for msgs in self._reader.feed(data):
            self._on_messages(msgs)
        return True

    def _read_loop(self) -> None:
        """The reader thread: reads while no other thread asked to (see `lend`)."""
        error: BaseException | None = None
        wake = self._wake_r
        try:
            while not self.closed:
                with self.read_lock:
                    self._reading = True
                    while not self._borrowers and not self.closed:
                        watch: list[Any] = [self.sock, wake, self._extra_r, *self.extra]
                        ready, _, _ = select.select(watch, [], [])
                        if len(ready) > 1 or ready[0] is not self.sock:
                            self._read_extra(ready)
                        if wake in ready:
                            os.read(wake, 4096)
                            continue
                        if self.sock not in ready:
                            continue
                        data = self._recv()
                        if not data:
                            raise EOFError
                        for msgs in self._reader.feed(data):
                            self._on_messages(msgs)
                    self._reading = False
                self._await_quiet()
        except EOFError:
            pass
        except OSError as exc:
            if not self.closed:
                error = exc
        except BaseException as exc:  # keep the process informed rather than dying silently
            log.exception("nbdist connection reader failed")
            error = exc
        if not self.closed:
            self.closed = True
            self._on_close(error)

    def _await_quiet(self) -> None:
        # Resume only after borrowers have been gone for a moment: in a loop of get() calls
        # the reader then stays out of the way instead of waking twice per call.
        while not self.closed:
            self._resume.wait()
            self._resume.clear()
            time.sleep(QUIET_S)
            if not self._borrowers:
                return

    def lend(self) -> None:
        """Ask the reader thread to stop reading, so the calling thread can `pump` itself
        (a thread waiting for a reply then wakes with it, without a thread hand-off)."""
        with self._borrow_lock:
            self._borrowers += 1
        if self._reading:
            with contextlib.suppress(BlockingIOError):
                os.write(self._wake_w, b"x")

    def give_back(self) -> None:
        with self._borrow_lock:
            self._borrowers -= 1
            if self._borrowers == 0:
                self._resume.set()

    def close(self) -> None:
        self.closed = True
        self._resume.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        for reader in self.extra:
            with contextlib.suppress(Exception):
                reader.close()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.sock.close()


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
        self._rbuf = bytearray(RECV_BYTES)
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
                    n = peer.sock.sendmsg(list(itertools.islice(wq, 0, _IOV_MAX)))
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
                if _tls_server is not None:
                    sock.setblocking(False)
                    sock = _tls_server.wrap_socket(sock, server_side=True,
                                                   do_handshake_on_connect=False)
            self.adopt(sock)

    def _start_handshake(self, peer: Peer) -> None:
        peer.nonce = os.urandom(NONCE)
        peer.wq.append(memoryview(MAGIC + peer.nonce))
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
        if len(peer.hbuf) < NONCE + 32:
            return b""
        client_nonce = bytes(peer.hbuf[:NONCE])
        digest = bytes(peer.hbuf[NONCE : NONCE + 32])
        rest = bytes(peer.hbuf[NONCE + 32 :])
        peer.hbuf = bytearray()
        if not hmac.compare_digest(digest, _digest(self.secret, b"C", peer.nonce, client_nonce)):
            self.drop(peer, "authentication failed (wrong cluster token)")
            return b""
        peer.authed = True
        peer.wq.append(memoryview(_digest(self.secret, b"S", client_nonce, peer.nonce)))
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
        if peer.authed:
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

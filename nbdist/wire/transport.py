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
* `nbdist.wire.server.Server`: a single-threaded selector loop (node daemon, head). It
  accepts, authenticates without blocking, reads frames, calls ``on_messages(peer, msgs)``, and
  at the end of each loop iteration writes every peer's queued messages as one frame, so bursts
  batch naturally.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import select
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from nbdist.wire.frames import DEFAULT_MAX_FRAME, FrameReader, TransportError, encode

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


def accept_tls(sock: socket.socket, timeout: float = 5.0) -> socket.socket:
    """The accepting side of TLS on a blocking TCP socket, when TLS is on (else ``sock``)."""
    if _tls_server is None:
        return sock
    sock.settimeout(timeout)
    try:
        return _tls_server.wrap_socket(sock, server_side=True)
    except ssl.SSLError as exc:
        sock.close()
        raise TransportError(f"TLS handshake failed: {exc}") from None


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



def readable(objs: list[Any], timeout: float | None = None) -> list[Any]:
    """Those of ``objs`` (sockets, descriptors) that have something to read, as
    ``select.select`` gives them, also when a descriptor is past select()'s limit (1024): a
    process that holds many files (a notebook kernel open for days) still reads its
    connections."""
    try:
        return select.select(objs, [], [], timeout)[0]
    except ValueError:  # "filedescriptor out of range in select()"
        pass
    poller = select.poll()
    by_fd: dict[int, Any] = {}
    for obj in objs:
        fd = obj if isinstance(obj, int) else obj.fileno()
        by_fd[fd] = obj
        poller.register(fd, select.POLLIN | select.POLLPRI)
    events = poller.poll(None if timeout is None else max(0, int(timeout * 1000)))
    return [by_fd[fd] for fd, _ in events]


def _close_fds(pid: int, fds: tuple[int, ...]) -> None:
    if os.getpid() != pid:
        # A forked child's copy of the object: the numbers may be its own files by now.
        return
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)

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
        # The pipes close when nothing can read or write them any more: when the connection
        # object goes (its reader thread holds it while it runs), not at close(), which other
        # threads may race with a select on them.
        weakref.finalize(self, _close_fds, os.getpid(), (self._wake_r, self._wake_w,
                                                         self._extra_r, self._extra_w))
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
            watch = [self.sock, self._extra_r, *self.extra]
            try:
                ready = select.select(watch, [], [], timeout)[0]
            except ValueError:
                ready = readable(watch, timeout)
            self._read_extra(ready)
            if self.sock not in ready:
                return not self.closed
        else:
            try:
                ready = select.select([self.sock], [], [], timeout)[0]
            except ValueError:
                ready = readable([self.sock], timeout)
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
                        try:
                            ready = select.select(watch, [], [])[0]
                        except ValueError:
                            ready = readable(watch)
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

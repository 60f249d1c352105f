"""A thin driver: a driver on a machine that runs no node (layer L2).

``nbdist.init("nbdist://HOST:PORT")`` (or Ray Client's ``"ray://HOST:PORT"``) connects to the
cluster's client server (`nbdist.daemons.client_server`), which runs beside the head and
attaches a relay as an ordinary driver of the node there. This process keeps the whole driver
state a driver on a node keeps (`runtime.CoreClient`: refs, waiters, events, task records), so
the API, the magics, the panel and the libraries work unchanged; only what a node-side driver
reads from shared memory differs:

* a value the node keeps in shared memory arrives as a placeholder location ``(oid, None,
  size)`` (in a ``DONE``, or an ``OBJ`` answering a get or wait); reading it asks for its bytes
  (`value` -> ``THIN_PULL``), which the relay sends out of band over the connection: objects
  move on demand, never eagerly;
* a large `put` gets its room from the node (``reserve``) and sends its bytes (``THIN_DATA``)
  for the relay to write into the node's store, then the usual ``PUT``.

The connection (`ThinConnection`) is TLS plus the cluster token, as every nbdist connection,
and resumable (`nbdist.wire.resumable`): when it drops, the thread that notices redials for the
grace period (`resumable.grace_period`, 30 s by default as Ray Client's) and
both sides replay what the other did not receive; calls blocked meanwhile just wait. A driver
that does not come back within it loses its session, and the relay ends its work on the
cluster.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import pickle
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from nbdist.driver import runtime
from nbdist.exceptions import ClusterError, NbdistError, ObjectLostError
from nbdist.wire import protocol as P
from nbdist.wire import resumable as R
from nbdist.wire import transport
from nbdist.wire.frames import DEFAULT_MAX_FRAME, FrameReader, TransportError, encode, encode_parts

DEFAULT_PORT = 10001  # Ray Client's
SCHEMES = ("nbdist://", "ray://")
_NOTHING = encode([])  # what a read returns after a redial: no message, not the end

Dial = Callable[[int], tuple[socket.socket, int]]


def is_thin_address(address: Any) -> bool:
    return isinstance(address, str) and address.startswith(SCHEMES)


def transport_address(address: str) -> str:
    """``nbdist://HOST[:PORT]`` or ``ray://HOST[:PORT]`` as ``tcp:HOST:PORT``."""
    rest = address.split("://", 1)[1].strip().rstrip("/")
    host, sep, port = rest.rpartition(":")
    if not sep:
        host, port = rest, str(DEFAULT_PORT)
    if not host or not port.isdigit():
        raise ValueError(f"Bad thin-driver address {address!r}: expected nbdist://HOST:PORT "
                         f"(or ray://HOST:PORT), e.g. nbdist://10.0.0.5:{DEFAULT_PORT}.")
    return f"tcp:{host}:{port}"


class SessionGone(ClusterError):
    """The relay no longer has this driver's session (its grace period ran out)."""


def dial(address: str, secret: bytes, resume: tuple[bytes, int] | None,
         timeout: float = 10.0) -> tuple[socket.socket, tuple]:
    """Connect, prove the token and say hello: the socket and the relay's ``THIN_WELCOME``."""
    sock = transport.connect(address, secret, timeout)
    try:
        R.keepalive(sock)
        sock.settimeout(timeout)
        sock.sendall(encode([(R.THIN_HELLO, P.PROTOCOL_VERSION, os.getpid(), resume)]))
        # Exactly the welcome's frame: what follows it is the stream's, read by the reader.
        length = int.from_bytes(_read_exact(sock, 4), "big")
        if length > 1 << 20:
            raise TransportError("the client server's welcome is malformed")
        msg = pickle.loads(_read_exact(sock, length))[0]
        sock.settimeout(None)
    except BaseException:
        sock.close()
        raise
    if msg[0] != R.THIN_WELCOME or "error" in msg[3]:
        sock.close()
        error = msg[3].get("error", msg) if msg[0] == R.THIN_WELCOME else msg
        raise (SessionGone if resume else ClusterError)(
            f"The nbdist client server at {address[4:]} refused this driver: {error}")
    return sock, msg


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise TransportError("the client server closed the connection")
        buf += chunk
    return bytes(buf)


def _populated(n: int) -> memoryview:
    """Memory for a large value arriving: anonymous pages mapped in one call (MAP_POPULATE),
    which costs about half of taking a page fault per 4 KiB as the bytes land."""
    flags = mmap.MAP_PRIVATE | getattr(mmap, "MAP_POPULATE", 0)
    return memoryview(mmap.mmap(-1, max(n, 1), flags=flags))[:n]


class ThinConnection(transport.Connection):
    """A `transport.Connection` that redials and replays instead of closing when its socket
    breaks (see the module docstring); it closes only when the grace period runs out, the
    relay has forgotten the session, or `close` is called."""

    def __init__(self, sock: socket.socket, on_messages: Callable[[list[Any]], None],
                 on_close: Callable[[BaseException | None], None], redial: Dial,
                 grace: float) -> None:
        super().__init__(sock, self._deliver, on_close, name="nbdist-thin-reader")
        self._reader = FrameReader(DEFAULT_MAX_FRAME, _populated)
        self._handler = on_messages
        self._redial_fn = redial
        self.grace = grace
        self.outbox = R.Outbox()
        self.inbox = R.Inbox()
        self.broken = False
        self.reconnects = 0
        self._redial_lock = threading.Lock()
        self._acker = threading.Thread(target=self._ack_loop, name="nbdist-thin-ack",
                                       daemon=True)

    def start(self) -> None:
        super().start()
        self._acker.start()

    def send(self, msgs: list[Any]) -> None:
        parts = encode_parts(msgs)  # large buffers stay where they are: no join
        with self._send_lock:
            if self.closed:
                raise TransportError("the connection to the nbdist cluster is closed")
            self.outbox.add(parts)
            if not self.broken:
                try:
                    R.send_parts(self.sock, parts)
                except OSError:
                    self.broken = True  # the reading thread redials; this frame is replayed

    def _deliver(self, msgs: list[Any]) -> None:
        if not msgs:
            return
        if R.is_ack(msgs):
            self.outbox.ack(msgs[0][1])
            return
        self.inbox.frame()
        self._handler(msgs)

    def _recv(self) -> memoryview:
        try:
            if self._reader.direct() is not None:
                return self._recv_big()
            view = super()._recv()
        except (OSError, EOFError):
            if self.closed:
                raise
            view = memoryview(b"")
        if view.nbytes or self.closed:
            self.inbox.bytes_in(view.nbytes)
            return view
        self._redial()
        return memoryview(_NOTHING)

    def _recv_big(self) -> memoryview:
        """The rest of a large frame, straight into its buffer and without a select per TLS
        record (a record is at most 16 KiB); its messages are delivered here."""
        reader = self._reader
        recv_into = self.sock.recv_into
        done: list[list[Any]] = []
        while (target := reader.direct()) is not None:
            got, want = 0, target.nbytes
            while got < want:  # one TLS record per call: nothing else per record
                n = recv_into(target[got:])
                if not n:
                    raise EOFError
                got += n
            self.inbox.bytes_in(got)
            done += reader.received(got)
        for msgs in done:
            self._deliver(msgs)
        return memoryview(_NOTHING)

    def _redial(self) -> None:
        with self._redial_lock:
            with self._send_lock:
                self.broken = True
                old = self.sock
            with contextlib.suppress(OSError):
                old.close()
            deadline = time.monotonic() + self.grace
            while True:
                if self.closed:
                    raise TransportError("the connection to the nbdist cluster is closed")
                try:
                    sock, got = self._redial_fn(self.inbox.received)
                    self._take_over(sock, got)
                    break
                except SessionGone as exc:
                    raise TransportError(str(exc)) from None
                except (OSError, NbdistError) as exc:
                    if time.monotonic() >= deadline:
                        raise TransportError(
                            f"lost the connection to the cluster and could not reconnect "
                            f"within {self.grace:.0f} s ({exc})") from None
                    time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
            self.reconnects += 1

    def _take_over(self, sock: socket.socket, got: int) -> None:
        with self._send_lock:
            self.sock = sock
            self._reader = FrameReader(DEFAULT_MAX_FRAME, _populated)
            self.outbox.ack(got)
            try:
                for parts in self.outbox.unacked():
                    R.send_parts(sock, parts)
            except OSError:
                sock.close()
                raise
            self.broken = False

    def _ack_loop(self) -> None:
        inbox = self.inbox
        while not self.closed:
            inbox.due.wait(R.ACK_INTERVAL_S)
            inbox.due.clear()
            if self.broken:
                continue
            n = inbox.take_ack()
            if n is None:
                continue
            with self._send_lock:
                if self.broken or self.closed:
                    continue
                try:
                    R.send_parts(self.sock, R.ack_frame(n))
                except OSError:
                    self.broken = True


class ThinClient(runtime.CoreClient):
    """The `runtime.CoreClient` of a thin driver (see the module docstring)."""

    def __init__(self, sock: socket.socket, info: dict[str, Any], redial: Dial,
                 grace: float) -> None:
        self._redial, self._grace = redial, grace
        super().__init__(sock, info, P.KIND_DRIVER)

    def _connection(self, sock: Any) -> transport.Connection:
        return ThinConnection(sock, self._on_messages, self._on_close, self._redial,
                              self._grace)

    def write_object(self, oid: int, parts: list[Any], size: int) -> int:
        offset = self.control("reserve", (oid, size, True), timeout=120.0)
        offset = offset if isinstance(offset, int) else -1
        buffers = [pickle.PickleBuffer(memoryview(p).cast("B")) for p in parts]
        self.send([(R.THIN_DATA, oid, offset, buffers, size)])
        return offset

    def value(self, loc: tuple) -> Any:
        if loc[1] is None:  # in the node's store: its bytes come over the connection now
            loc = self._pull(loc[0])
        return super().value(loc)

    def _store(self, loc: tuple) -> None:
        if loc[1] is None:  # a placeholder never replaces bytes already here
            held = self._cache.get(loc[0])
            if held is not None and held[1] is not None:
                loc = held
        super()._store(loc)

    def _pull(self, oid: int) -> tuple:
        """The bytes of ``oid`` from the cluster (no timeout: a large value on a slow link
        takes what it takes; a lost one comes back as an error value)."""
        with self._lock:
            self._cache.pop(oid, None)
            self._leases.pop(oid, None)
            self._fetching.add(oid)
            self._requested.add(oid)  # asked for here, not with a GET_REQ by `_block`
        try:
            self.send([(R.THIN_PULL, [oid])])
            self._block([oid], 1, None)
            loc = self._cache.get(oid)
        finally:
            with self._lock:
                self._fetching.discard(oid)
                self._requested.discard(oid)
                if oid not in self._refs:
                    self._cache.pop(oid, None)
        if loc is None or loc[1] is None:
            raise ObjectLostError(f"The cluster sent no bytes for object {oid:x}.")
        return loc

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(NbdistError, OSError):
                self.send([(R.THIN_BYE,)])
        super().close()


def connect(address: str, secret: bytes) -> ThinClient:
    """Attach a thin driver to the client server at ``address`` (``nbdist://HOST:PORT``)."""
    where = transport_address(address) if is_thin_address(address) else address
    grace = R.grace_period()
    try:
        sock, welcome = dial(where, secret, None)
    except (OSError, TransportError) as exc:
        raise ClusterError(
            f"Cannot reach an nbdist client server at {where[4:]}: {exc}. Check the address "
            "printed by `nbdist start --head`, the token (NBDIST_TOKEN) and, if the cluster "
            "uses TLS, NBDIST_TLS_CERT / NBDIST_TLS_KEY / NBDIST_TLS_CA.") from None
    info = dict(welcome[3])
    info["client_no"] = welcome[2]
    key = info["session"]

    def redial(received: int) -> tuple[socket.socket, int]:
        sock, msg = dial(where, secret, (key, received))
        return sock, int(msg[4])

    client = ThinClient(sock, info, redial, grace)
    client.info["head"] = where[4:]
    return client

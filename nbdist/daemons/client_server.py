"""The client server: how thin drivers reach a cluster (layer L2).

Started beside the head by ``nbdist start --head`` (``--client-port``, 10001 by default as
Ray Client's), it listens on TCP with the cluster's TLS and token. Each thin driver
(`nbdist.driver.thin`) that says ``THIN_HELLO`` gets a `Relay`: a connection of its own to
the node on this machine, as an ordinary driver (so the node gives it a job of its own, and
its tasks, actors and objects are that driver's alone), and the driver's resumable
connection (`nbdist.wire.resumable`)::

    thin driver ══TLS══▶ client server ── Relay ──unix──▶ node daemon ──▶ workers, other nodes

A relay passes the node protocol through unchanged but for object bytes, which a thin driver
cannot read from shared memory:

* node -> driver: values in shared memory travel as placeholders ``(oid, None, size)`` (in
  ``DONE`` and ``OBJ``) until the driver asks for their bytes (``THIN_PULL``); the ``OBJ`` that
  answers it carries them out of band, read straight from the node's arena or file; the arena
  range stays leased until the driver acknowledges the frame (so a replay can send it again),
  then goes back with ``UNPIN``. A `wait` or a ref passed on moves no bytes.
* driver -> node: ``THIN_DATA`` (a large put's bytes) is written into the range the node
  granted the driver (``reserve``), or a file, before the ``PUT`` that follows it is passed on.

Threads: the main thread accepts, acknowledges and expires sessions (`ClientServer.serve`); a
short-lived thread per new connection does TLS, the token and the hello; per relay, one thread
reads the driver's socket (and writes to the node) and the node connection's reader thread
writes to the driver. ``Relay.lock`` guards the driver's socket and the order of frames sent on
it. A relay whose driver is gone longer than the grace period, or that said ``THIN_BYE``,
closes its node connection: the node then ends that driver's work as for any driver that left.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import mmap
import os
import pickle
import signal
import socket
import struct
import sys
import threading
import time
from typing import Any

from nbdist import config as config_mod
from nbdist.cluster import lifetime
from nbdist.objects import store
from nbdist.wire import protocol as P
from nbdist.wire import resumable as R
from nbdist.wire import transport
from nbdist.wire.frames import DEFAULT_MAX_FRAME, FrameReader, TransportError, encode, encode_parts

log = logging.getLogger("nbdist.daemons.client_server")

HELLO_TIMEOUT_S = 10.0


class Relay:
    """One thin driver's session (see the module docstring)."""

    def __init__(self, server: ClientServer, key: bytes, node_sock: socket.socket) -> None:
        self.server = server
        self.key = key
        self.lock = threading.Lock()
        self._attach_lock = threading.Lock()
        self.sock: socket.socket | None = None
        self._reader: threading.Thread | None = None
        self.detached_at: float | None = time.monotonic()
        self.ended = False
        self.outbox = R.Outbox()
        self.inbox = R.Inbox()
        self.pulls: set[int] = set()  # ids whose bytes the driver asked for
        self.node = _NodeLink(node_sock, self._from_node, self._node_closed,
                              name="nbdist-relay-node")
        self._into: tuple[bytes, memoryview] | None = None  # (frame head, room left in it)
        self.node.send([(P.HELLO, P.PROTOCOL_VERSION, P.KIND_DRIVER, os.getpid(), {})])
        frames = self.node.recv_blocking()
        welcome = frames[0][0]
        if welcome[0] != P.WELCOME or "error" in welcome[3]:
            raise TransportError(f"the node refused the relay: {welcome[3].get('error')}")
        self.client_no: int = welcome[2]
        info = self.info = dict(welcome[3])
        where = info.get("arena")
        self.arena = store.attach(where[0], where[1]) if where else None
        self.shm_dir: str = info["shm_dir"]
        self.node_pid: int = info["node_pid"]
        # What the driver must not use: this machine's arena, sockets and files.
        info.update(arena=None, local_address="", session=key, thin=True)
        rest = [m for frame in frames for m in frame][1:]
        if rest:
            self._from_node(rest)
        self.node.start()

    # ------------------------------------------------------------------ the driver's side
    def attach(self, sock: socket.socket, driver_got: int) -> None:
        """Take the driver's (new) connection: welcome it and replay what it lacks."""
        with self._attach_lock:
            old, reader = self.sock, self._reader
            if old is not None:
                with contextlib.suppress(OSError):
                    old.shutdown(socket.SHUT_RDWR)
            if reader is not None:
                reader.join(5.0)  # it counts what it read: finished before we say how much
            with self.lock:
                welcome = (R.THIN_WELCOME, P.PROTOCOL_VERSION, self.client_no, self.info,
                           self.inbox.received)
                self.outbox.ack(driver_got)
                try:
                    sock.sendall(encode([welcome]))
                    for parts in self.outbox.unacked():
                        R.send_parts(sock, parts)
                except OSError:
                    sock.close()
                    return
                self.sock = sock
                self.detached_at = None
            self._reader = threading.Thread(target=self._read_driver, args=(sock,),
                                            name="nbdist-relay-driver", daemon=True)
            self._reader.start()

    def _read_driver(self, sock: socket.socket) -> None:
        reader = FrameReader(DEFAULT_MAX_FRAME, lambda n: self._room(reader, n))
        buf = bytearray(1 << 20)
        recv_into = sock.recv_into
        try:
            while not self.ended:
                target = reader.direct()
                if target is not None:  # the rest of a large frame: straight into place
                    frames = reader.received(_recv_all(recv_into, target))
                    self.inbox.bytes_in(target.nbytes)
                else:
                    n = recv_into(buf)
                    if not n:
                        break
                    self.inbox.bytes_in(n)
                    frames = reader.feed(memoryview(buf)[:n])
                for msgs in frames:
                    self._from_driver(msgs)
        except (OSError, TransportError) as exc:
            if not self.ended:
                log.info("nbdist client server: driver %x disconnected: %s", self.client_no,
                         exc)
        except Exception:  # a message it could not apply: this session ends, the server goes on
            log.exception("nbdist client server: bad input from driver %x", self.client_no)
            self.end("bad input from the driver")
        with self.lock:
            if self.sock is sock:
                self.sock = None
                self.detached_at = time.monotonic()
        with contextlib.suppress(OSError):
            sock.close()

    def _from_driver(self, msgs: list[Any]) -> None:
        if R.is_ack(msgs):
            self.outbox.ack(msgs[0][1])
            return
        self.inbox.frame()
        out = []
        for msg in msgs:
            op = msg[0]
            if op == R.THIN_DATA:
                self._write(msg)
            elif op == R.THIN_PULL:
                self.pulls.update(msg[1])
                out.append((P.GET_REQ, msg[1]))
            elif op == R.THIN_BYE:
                self.end("the driver shut down")
                return
            else:
                out.append(msg)
        if out:
            try:
                self.node.send(out)
            except OSError:
                self.end("lost the node")

    def _room(self, reader: FrameReader, n: int) -> memoryview:
        """Where a buffer of a large frame from the driver is received: a ``THIN_DATA`` for a
        range of the arena goes straight into that range (no copy after TLS's), the rest
        into memory of their own. Called for each buffer in turn, once the frame's header
        and pickle (``reader.big_head``) are in."""
        into = self._into
        if into is None or into[0] is not reader.big_head:  # the frame's first buffer
            into = self._into = (reader.big_head, self._thin_data_range(reader.big_head))
        target = into[1]
        if not target.nbytes:
            return memoryview(mmap.mmap(-1, max(n, 1)))[:n]
        self._into = (into[0], target[n:])  # the buffers add up to the range: checked
        return target[:n]

    def _thin_data_range(self, head: bytes) -> memoryview:
        if self.arena is None:
            return memoryview(b"")
        try:
            plen, nbuf = struct.unpack_from("!II", head, 0)
            lengths = struct.unpack_from(f"!{nbuf}Q", head, 8)
            pickled = memoryview(head)[8 + 8 * nbuf : 8 + 8 * nbuf + plen]
            (op, oid, offset, _, size), = pickle.loads(pickled, buffers=[b""] * nbuf)
        except Exception:  # not a lone THIN_DATA: decoded as usual once it is all in
            return memoryview(b"")
        if (op != R.THIN_DATA or offset < 0 or sum(lengths) != size or size <= 0
                or offset + size > self.arena.view.nbytes):
            return memoryview(b"")
        self._in_place = oid
        _prefault(self.arena.mm, offset, size, _MADV_POPULATE_WRITE)
        return self.arena.view[offset : offset + size]

    _in_place = -1  # the THIN_DATA whose bytes were received into its range

    def _write(self, msg: tuple) -> None:
        _, oid, offset, parts, size = msg
        if oid == self._in_place:
            self._in_place = -1
            return
        if offset >= 0 and self.arena is not None:
            self.arena.write(offset, parts, size)
        else:
            store.write(os.path.join(self.shm_dir, P.shm_name(self.node_pid, oid)), parts, size)

    def send_ack(self) -> None:
        n = self.inbox.take_ack()
        if n is None:
            return
        with self.lock:
            if self.sock is not None:
                with contextlib.suppress(OSError):
                    R.send_parts(self.sock, R.ack_frame(n))

    # ------------------------------------------------------------------ the node's side
    def _from_node(self, msgs: list[Any]) -> None:
        out: list[Any] = []
        later: list[int] = []  # arena ranges read by a frame: given back when it is acknowledged
        now: list[int] = []
        for msg in msgs:
            op = msg[0]
            if op == P.OBJ:
                oid = msg[1][0]
                if oid in self.pulls:
                    loc = self._inline(msg[1], later)
                    if loc is not None:
                        self.pulls.discard(oid)
                        out.append((P.OBJ, loc))
                else:
                    out.append((P.OBJ, self._placeholder(msg[1], now)))
            elif op == P.DONE:
                out.append((*msg[:3], [self._placeholder(loc, now) for loc in msg[3]],
                            *msg[4:]))
            else:
                out.append(msg)
        if now:
            self._unpin(now)
        if out:
            self.to_driver(out, (lambda: self._unpin(later)) if later else None)

    def _placeholder(self, loc: tuple, unpin: list[int]) -> tuple:
        if loc[1] is not None:
            return loc
        offset = P.loc_offset(loc)
        if offset >= 0:
            unpin.append(offset)  # the node leased it to us; the driver reads it later
        return (loc[0], None, loc[2])

    def _inline(self, loc: tuple, later: list[int]) -> tuple | None:
        oid, blob, size = loc[0], loc[1], loc[2]
        if blob is not None:
            return loc
        offset = P.loc_offset(loc)
        if offset >= 0 and self.arena is not None:
            later.append(offset)
            if size >= _PREFAULT_MIN:
                _prefault(self.arena.mm, offset, size, _MADV_POPULATE_READ)
            return (oid, pickle.PickleBuffer(self.arena.read(offset, size)), size)
        try:
            view = store.map_readonly(os.path.join(self.shm_dir, P.shm_name(self.node_pid, oid)))
        except FileNotFoundError:  # spilled meanwhile: the node brings it back and sends it
            with contextlib.suppress(OSError):
                self.node.send([(P.GET_REQ, [oid])])
            return None
        return (oid, pickle.PickleBuffer(view), size)

    def _unpin(self, offsets: list[int]) -> None:
        with contextlib.suppress(OSError):
            self.node.send([(P.UNPIN, offsets)])

    def to_driver(self, msgs: list[Any], on_ack: Any = None) -> None:
        parts = encode_parts(msgs)
        with self.lock:
            self.outbox.add(parts, on_ack)
            sock = self.sock
            if sock is not None:
                try:
                    R.send_parts(sock, parts)
                except OSError:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)  # its reader detaches the session

    def _node_closed(self, error: BaseException | None) -> None:
        self.end(f"the node closed the connection ({error})" if error else
                 "the node closed the connection")

    def end(self, why: str) -> None:
        if self.ended:
            return
        self.ended = True
        log.info("nbdist client server: session of driver %x ends: %s", self.client_no, why)
        self.server.forget(self)
        self.node.close()  # the node ends this driver's work, as for any driver that left
        with self.lock:
            sock, self.sock = self.sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
        self.outbox.drop_all()


class ClientServer:
    def __init__(self, secret: bytes, node_address: str, grace: float) -> None:
        self.secret = secret
        self.node_address = node_address
        self.grace = grace
        self.sessions: dict[bytes, Relay] = {}
        self._lock = threading.Lock()
        self.running = True
        self._wake_r, self._wake_w = os.pipe()

    def forget(self, relay: Relay) -> None:
        with self._lock:
            if self.sessions.get(relay.key) is relay:
                del self.sessions[relay.key]

    def stop(self) -> None:
        self.running = False
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def serve(self, lsock: socket.socket, parent_fd: int = -1) -> None:
        watch: list[Any] = [lsock, self._wake_r] + ([parent_fd] if parent_fd >= 0 else [])
        while self.running:
            ready = transport.readable(watch, R.ACK_INTERVAL_S)
            if parent_fd >= 0 and parent_fd in ready and not os.read(parent_fd, 64):
                break
            if lsock in ready:
                with contextlib.suppress(BlockingIOError, InterruptedError):
                    sock, _ = lsock.accept()
                    threading.Thread(target=self._greet, args=(sock,), daemon=True,
                                     name="nbdist-relay-greet").start()
            self._tick()
        for relay in list(self.sessions.values()):
            relay.end("the client server stops")

    def _tick(self) -> None:
        now = time.monotonic()
        for relay in list(self.sessions.values()):
            relay.send_ack()
            gone = relay.detached_at
            if gone is not None and now - gone > self.grace:
                relay.end(f"its driver did not come back within {self.grace:.0f} s")

    def _greet(self, sock: socket.socket) -> None:
        try:
            sock.setblocking(True)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            R.keepalive(sock)
            sock = transport.accept_tls(sock, HELLO_TIMEOUT_S)
            transport.server_handshake(sock, self.secret, HELLO_TIMEOUT_S)
            sock.settimeout(HELLO_TIMEOUT_S)
            hello = _read_frame(sock)[0]
            sock.settimeout(None)
            if not (isinstance(hello, tuple) and len(hello) == 4 and hello[0] == R.THIN_HELLO):
                raise TransportError("the first message was not a thin driver's hello")
        except (OSError, TransportError, pickle.UnpicklingError, IndexError) as exc:
            log.warning("nbdist client server: refused a connection: %s", exc)
            with contextlib.suppress(OSError):
                sock.close()
            return
        self._hello(sock, hello)

    def _hello(self, sock: socket.socket, hello: tuple) -> None:
        _, version, _pid, resume = hello
        error = ""
        relay = None
        if version != P.PROTOCOL_VERSION:
            error = (f"protocol version {version} is not supported (the cluster speaks "
                     f"{P.PROTOCOL_VERSION}); use the same nbdist version as the cluster")
        elif resume is None:
            try:
                relay = self._new_session()
            except (OSError, TransportError) as exc:
                error = f"the node on the head's machine is not reachable: {exc}"
        else:
            with self._lock:
                relay = self.sessions.get(resume[0])
            if relay is None:
                error = ("its session is gone (it was away longer than the grace period of "
                         f"{self.grace:.0f} s, or the cluster restarted)")
        if relay is None:
            with contextlib.suppress(OSError):
                sock.sendall(encode([(R.THIN_WELCOME, P.PROTOCOL_VERSION, 0,
                                      {"error": error}, 0)]))
                sock.close()
            return
        relay.attach(sock, 0 if resume is None else int(resume[1]))

    def _new_session(self) -> Relay:
        key = os.urandom(16)
        relay = Relay(self, key, transport.connect(self.node_address, self.secret))
        with self._lock:
            self.sessions[key] = relay
        log.info("nbdist client server: driver %x attached", relay.client_no)
        return relay


_MADV_POPULATE_READ = 22  # Linux 5.14+: map a range's pages in one call, not a fault per page
_MADV_POPULATE_WRITE = 23
_PREFAULT_MIN = 1 << 20


def _prefault(mm: mmap.mmap, offset: int, size: int, advice: int) -> None:
    """Map ``[offset, offset + size)`` of ``mm`` into this process at once (a fault per 4 KiB
    page costs more than copying it); nothing where the kernel does not know the advice."""
    start = offset - offset % mmap.PAGESIZE
    with contextlib.suppress(OSError, ValueError):
        mm.madvise(advice, start, min(size + offset - start, len(mm) - start))


def _recv_all(recv_into: Any, target: memoryview) -> int:
    """Fill ``target`` from the socket (a TLS socket hands over one record, at most 16 KiB,
    per call: this loop is the whole per-record cost)."""
    got, want = 0, target.nbytes
    while got < want:
        n = recv_into(target[got:])
        if not n:
            raise TransportError("the driver closed the connection")
        got += n
    return got


class _NodeLink(transport.Connection):
    """The relay's connection to the node: what the node has sent so far goes to the driver
    as one frame (`Relay._from_node` is called once per burst, not once per frame: a TLS
    write costs far more than a few messages more in it)."""

    BURST = 4096  # messages at most in one frame to the driver

    def _read_loop(self) -> None:
        error: BaseException | None = None
        sock = self.sock
        try:
            while not self.closed:
                data = self._recv()
                if not data:
                    break
                frames = self._reader.feed(data)
                if not frames:
                    continue
                msgs = frames[0] if len(frames) == 1 else [m for f in frames for m in f]
                # More already waiting (the node answers as tasks end): into the same frame.
                while (len(msgs) < self.BURST and self._reader.direct() is None
                       and transport.readable([sock], 0)):
                    data = self._recv()
                    if not data:
                        break
                    msgs = [*msgs, *(m for f in self._reader.feed(data) for m in f)]
                self._on_messages(msgs)
                if not data:
                    break
        except (OSError, ValueError) as exc:  # ValueError: select on a socket just closed
            if not self.closed:
                error = exc
        except BaseException as exc:
            log.exception("nbdist client server: the node connection's reader failed")
            error = exc
        if not self.closed:
            self.closed = True
            self._on_close(error)


def _read_frame(sock: socket.socket) -> list[Any]:
    head = _recv_exact(sock, 4)
    length = int.from_bytes(head, "big")
    if length > 1 << 20:
        raise TransportError("the hello frame is too large")
    msgs = pickle.loads(_recv_exact(sock, length))
    if not isinstance(msgs, list) or not msgs:
        raise TransportError("malformed hello frame")
    return msgs


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise TransportError("the connection closed during the hello")
        buf += chunk
    return bytes(buf)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="nbdist-client-server")
    p.add_argument("--listen", required=True)
    p.add_argument("--node", required=True, help="the node daemon's address on this machine")
    p.add_argument("--parent-fd", type=int, default=-1)
    p.add_argument("--ready-file", default="")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s client-server %(levelname)s %(message)s")
    if os.environ.pop("NBDIST_DEATHSIG", "1") == "1":
        lifetime.die_with_parent(signal.SIGTERM)
    secret = bytes.fromhex(os.environ.pop("NBDIST_CLUSTER_SECRET"))
    cfg = config_mod.Config.from_dict(json.loads(os.environ.pop("NBDIST_CONFIG", "{}")))
    if cfg.tls_cert:
        transport.configure_tls(cfg.tls_cert, cfg.tls_key, cfg.tls_ca)
    server = ClientServer(secret, args.node, R.grace_period())
    signal.signal(signal.SIGTERM, lambda *_: server.stop())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    lsock = transport.listen(args.listen)
    lsock.setblocking(False)
    if args.ready_file:
        with open(args.ready_file + ".tmp", "w") as f:
            f.write(transport.bound_address(lsock))
        os.replace(args.ready_file + ".tmp", args.ready_file)
    try:
        server.serve(lsock, args.parent_fd)
    finally:
        lsock.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

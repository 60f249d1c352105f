"""The node daemon: one per machine (layer L2).

It owns, on one thread, a `transport.Server` loop and the `scheduler.NodeState` it feeds:
drivers and workers connect to it; it forks worker processes (cheap: the daemon imports little,
and the children share its pages) and talks to each over an authenticated socketpair; it relays
cluster queries (nodes, named actors) to the head over one more connection in the same loop.

    driver ──SUBMIT/PUT/GET_REQ──▶ node ──EXEC──▶ worker
       ▲                            │  ◀──RESULT──┘
       └───────DONE/OBJ/STARTED─────┘

Lifetime: the daemon exits when its parent's pipe (``--parent-fd``) reaches EOF, on SIGTERM, or
when its parent dies (PR_SET_PDEATHSIG); on the way out it kills its workers and removes its
shared-memory files and socket. Workers die with it (PDEATHSIG and EOF on their socketpair).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import mmap
import os
import pickle
import shutil
import signal
import socket
import sys
import tempfile
import time
import weakref
from typing import Any

from . import config as config_mod
from . import events as ev
from . import ids, lifetime, links, store, transport
from . import protocol as P
from .exceptions import ObjectLostError
from .scheduler import Client, NodeState, Worker
from .serialization import system_error_blob
from .store import unlink as unlink_file

log = logging.getLogger("nbdist.node")

# Task-started and object-freed notices go out at most this often (batched); the panel
# redraws at ~10 Hz, and tasks shorter than this need no separate notice at all.
NOTICE_S = 0.02
# Connecting to another node that the head lists alive but that did not answer: first retry
# after RECONNECT_FIRST_S, then doubling up to RECONNECT_MAX_S; each try waits at most
# RECONNECT_TIMEOUT_S (it blocks this loop, so it is kept short).
RECONNECT_FIRST_S = 0.2
RECONNECT_MAX_S = 5.0
RECONNECT_TIMEOUT_S = 2.0


class NodeDaemon:
    """Process-level I/O around `NodeState` (the scheduler's ``NodeIO``)."""

    def __init__(self, args: argparse.Namespace, secret: bytes, cfg: config_mod.Config) -> None:
        self.args = args
        self.secret = secret
        self.cfg = cfg
        self.node_pid = os.getpid()
        self.node_index = args.node_index
        self.node_id = f"{self.node_index:04x}{self.node_pid:08x}"
        self.shm_dir = cfg.shm_dir
        self.server = transport.Server(
            secret, self.on_messages, self.on_close,
            max_frame=cfg.max_frame_bytes, handshake_timeout=cfg.handshake_timeout_s)
        self.server.on_iteration = self.on_iteration
        resources: dict[str, float] = {"CPU": float(args.num_cpus)}
        if args.num_gpus:
            resources["GPU"] = float(args.num_gpus)
        resources.update({k: float(v) for k, v in json.loads(args.resources or "{}").items()})
        resources["memory"] = float(config_mod.total_memory())
        resources["object_store_memory"] = float(cfg.object_store_memory)
        resources[f"node:{self.node_id}"] = 1.0
        self.state = NodeState(self, resources, list(range(int(args.num_gpus or 0))),
                               int(args.num_cpus), cfg.max_extra_workers, cfg.object_store_memory)
        if args.head.startswith("tcp:"):  # other nodes can join: see NodeState.parked
            self.state.placement.infeasible_wait = cfg.infeasible_wait_s
        self.state.objects.spill_limit = cfg.spill_max_bytes
        self.state.notices.node_id = self.node_id  # named by its event records
        self.next_local = 1
        self.worker_peers: dict[int, Worker] = {}
        self.head: transport.Peer | None = None
        self.head_pending: dict[int, tuple[Client, int]] = {}
        self.head_token = 0
        # Cluster queries that arrive while the head connection is still being made wait here.
        self.head_waiting: list[tuple[Client, int, str, Any]] = []
        self.head_lost = False
        # Other nodes: the head's view, our connection to each (we send on ours, they send on
        # theirs), the peer Client each is known by here, and the functions sent to each.
        self.view: dict[int, dict[str, Any]] = {}
        self.node_out: dict[int, transport.Peer] = {}
        self.node_clients: dict[int, Client] = {}
        self.sent_fns: dict[int, set[int]] = {}
        self.lost_nodes: set[int] = set()
        # Messages for a node the head lists alive but that we could not connect to (yet):
        # sent in order once a retry connects; dropped when the head says it is gone.
        self.out_queue: dict[int, list[tuple]] = {}
        self.res_dirty = False
        self.address = ""
        self.local_address = ""
        self.stopping = False
        self.exit_code = 0
        self.spill_dir = ""  # made at the first spill, removed with the node
        self._received_files: dict[int, tuple[weakref.ref[mmap.mmap], str, int]] = {}
        self._receive_seq = 0
        self._link_seq = 0
        self.boot_id = lifetime.boot_id()
        self.server.alloc = self._receive_file
        self.arena: store.Arena | None = None
        arena_size = cfg.object_store_memory if cfg.arena_bytes == 0 else cfg.arena_bytes
        if arena_size >= store.ARENA_ALIGN:
            try:
                self.arena = store.create_arena(
                    os.path.join(self.shm_dir, P.arena_name(self.node_pid)), arena_size)
            except OSError as exc:
                log.warning("nbdist node: no shared-memory arena (%s): one file per object", exc)
        if self.arena is not None:
            self.state.objects.enable_arena(self.arena.size)

    # ---------------------------------------------------------------- NodeIO
    def send(self, client: Client, msg: tuple) -> None:
        if client.kind == P.KIND_NODE:
            self._send_to_node_client(client, msg)
        elif client.peer is not None:
            self.server.send(client.peer, msg)

    # ---------------------------------------------------------------- other nodes
    def _value(self, loc: tuple, index: int) -> tuple:
        """A Loc made portable for node ``index``: ``(oid, blob, data, contained, link, size)``.
        The bytes of a shared-memory file go along as ``data``; to a node on this machine (it
        shares /dev/shm) a hard link named for it goes instead, which it renames into place:
        no copy at all."""
        oid, blob, size = loc[0], loc[1], loc[2]
        contained = tuple(loc[3]) if len(loc) > 3 else ()
        if blob is not None or not size:
            return (oid, blob, None, contained, "", 0)
        offset = P.loc_offset(loc)
        if offset >= 0 and self.arena is not None:
            # A copy: the transport writes out of band later, when the range may be reused.
            data = pickle.PickleBuffer(bytearray(self.arena.read(offset, size)))
            return (oid, None, data, contained, "", size)
        peer = self.view.get(index) or {}
        if (self.cfg.same_host_links and peer.get("boot_id") == self.boot_id
                and peer.get("shm_dir") == self.shm_dir and peer.get("pid")):
            self._link_seq += 1
            link = os.path.join(self.shm_dir,
                                f"nbdist-{peer['pid']}-from{self.node_pid}x{self._link_seq}")
            try:
                os.link(self._shm_path(oid), link)
                return (oid, None, None, contained, link, size)
            except OSError as exc:
                log.warning("nbdist node: cannot link object %x for node %d: %s", oid, index,
                            exc)
        data = pickle.PickleBuffer(store.map_readonly(self._shm_path(oid)))
        return (oid, None, data, contained, "", size)

    def _local(self, val: tuple) -> tuple:
        """A received value as a Loc of this node (a shared-memory copy when it has data)."""
        oid, blob, data, contained, link, size = val
        path = self._shm_path(oid)
        if link:
            unlink_file(path)
            try:
                os.rename(link, path)
            except OSError as exc:
                unlink_file(link)
                err = ObjectLostError(f"Object {oid:x} did not arrive from another node: {exc}")
                return (oid, system_error_blob(err), 0, contained)
            return (oid, None, size, contained)
        if data is None:
            return (oid, blob, 0, contained)
        unlink_file(path)
        view = memoryview(data)
        received = self._received_files.pop(id(view.obj), None)
        if received is not None and received[0]() is view.obj and view.nbytes == received[2]:
            os.rename(received[1], path)  # it was read straight into a file of the store
        else:
            store.write(path, [view], view.nbytes)
        return (oid, None, view.nbytes, contained)

    def _receive_file(self, n: int) -> memoryview:
        """`transport.Server.alloc`: a large value from another node is read straight into a
        shared-memory file, renamed into place when its message is handled."""
        self._receive_seq += 1
        path = os.path.join(self.shm_dir, f"nbdist-{self.node_pid}-in{self._receive_seq}")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, n)
            mm = mmap.mmap(fd, max(n, 1))
        finally:
            os.close(fd)
        # Files never claimed (a connection dropped mid-frame) go when their mapping does.
        for key in [k for k, (ref, p, _) in self._received_files.items() if ref() is None]:
            unlink_file(self._received_files.pop(key)[1])
        self._received_files[id(mm)] = (weakref.ref(mm), path, n)
        return memoryview(mm)[:n]

    def _shm_path(self, oid: int) -> str:
        return os.path.join(self.shm_dir, P.shm_name(self.node_pid, oid))

    # ---------------------------------------------------------------- spilling (NodeIO)
    # The file I/O only: which objects go to disk, and when, is the object table's policy
    # (`scheduler.objects.ObjectTable.make_room`).
    def _spill_path(self, oid: int) -> str:
        if not self.spill_dir:
            self.spill_dir = os.path.join(self.cfg.spill_dir or tempfile.gettempdir(),
                                          f"nbdist-spill-{self.node_pid}")
            os.makedirs(self.spill_dir, mode=0o700, exist_ok=True)
        return os.path.join(self.spill_dir, f"{oid:x}")

    def spill(self, oid: int, size: int) -> str | None:
        path = self._spill_path(oid)
        try:
            shutil.copyfile(self._shm_path(oid), path)
        except OSError as exc:
            log.error("nbdist node: cannot spill object %x to %s: %s", oid, path, exc)
            unlink_file(path)
            return None
        unlink_file(self._shm_path(oid))
        return path

    def restore(self, oid: int, path: str) -> bool:
        target = self._shm_path(oid)
        try:
            shutil.copyfile(path, target)
        except OSError as exc:
            log.error("nbdist node: cannot restore object %x from %s: %s", oid, path, exc)
            unlink_file(target)
            return False
        unlink_file(path)
        return True

    def remove_spill(self, path: str) -> None:
        unlink_file(path)

    def _send_to_node_client(self, client: Client, msg: tuple) -> None:
        op = msg[0]
        index = client.node_index
        if op == P.DONE:
            _, task_id, ok, locs, t0, t1, pid = msg
            vals = [self._value(loc, index) for loc in locs]
            # Objects of ours that the results contain stay alive for that node until it
            # lets go (NODE_REFS).
            mine = [c for v in vals for c in v[3] if c >> P.OWNER_SHIFT == self.node_index]
            if mine:
                self.state.refs(client, [(1, c) for c in mine])
            self.to_node(index, (P.RESULTS, task_id, ok, vals, t0, t1, pid))
        elif op == P.OBJ:
            self.to_node(index, (P.VALUE, self._value(msg[1], index)))
        elif op == P.STARTED:
            self.to_node(index, (P.NODE_STARTED, [tid for tid, _ in msg[1]], msg[2]))
        else:
            log.debug("nbdist node: nothing to send node %d for message %r", index, op)

    def forward(self, index: int, spec: tuple, dep_locs: list) -> None:
        fid = spec[P.S_FID]
        sent = self.sent_fns.setdefault(index, set())
        fn = None
        if fid and fid not in sent:
            fn = self.state.tasks.fns.get(fid)
            sent.add(fid)
        self.to_node(index, (P.FORWARD, spec, fn, [self._value(loc, index) for loc in dep_locs]))

    def to_node(self, index: int, msg: tuple) -> None:
        if index in self.lost_nodes:
            return  # gone for good (indexes are never reused)
        waiting = self.out_queue.get(index)
        if waiting is not None:
            waiting.append(msg)
            return
        peer = self.node_out.get(index)
        if peer is None or peer.closed:
            peer = self._connect_node(index)
            if peer is None:
                if self._listed_alive(index):
                    # A refused or unroutable connection is not a dead node: the head, which
                    # holds a connection to every node, decides that. Try again meanwhile.
                    self.out_queue[index] = [msg]
                    self._retry_connect(index, RECONNECT_FIRST_S)
                else:
                    self._node_gone(index)
                return
        self.server.send(peer, msg)

    def _listed_alive(self, index: int) -> bool:
        info = self.view.get(index)
        return bool(info and info.get("alive"))

    def _retry_connect(self, index: int, delay: float) -> None:
        def attempt() -> None:
            if index in self.lost_nodes or index not in self.out_queue or self.stopping:
                return
            if not self._listed_alive(index):
                self.out_queue.pop(index, None)
                self._node_gone(index)
                return
            peer = self._connect_node(index, timeout=RECONNECT_TIMEOUT_S)
            if peer is None:
                self._retry_connect(index, min(delay * 2, RECONNECT_MAX_S))
                return
            log.info("nbdist node: reached node %d again", index)
            for queued in self.out_queue.pop(index):
                self.server.send(peer, queued)

        self.server.call_later(delay, attempt)

    def _node_gone(self, index: int) -> None:
        self.out_queue.pop(index, None)
        if index not in self.lost_nodes:
            self.lost_nodes.add(index)
            self.state.node_lost(index)

    def _connect_node(self, index: int, timeout: float = 0.0) -> transport.Peer | None:
        info = self.view.get(index)
        if info is None or not info.get("alive"):
            log.warning("nbdist node: node %d is not in the cluster", index)
            return None
        address = str(info["address"])
        if address.startswith("tcp:0.0.0.0:"):
            address = "tcp:127.0.0.1:" + address.rsplit(":", 1)[1]
        try:
            sock = transport.connect(address, self.secret,
                                     timeout or self.cfg.handshake_timeout_s)
        except OSError as exc:
            if index not in self.out_queue:  # once per outage, not per retry
                log.warning("nbdist node: cannot reach node %d at %s: %s (trying again while "
                            "the head lists it)", index, address, exc)
            return None
        peer = self.server.adopt(sock, authed=True)
        peer.info = ("node_out", index)
        self.node_out[index] = peer
        self.server.send(peer, (P.HELLO, P.PROTOCOL_VERSION, P.KIND_NODE, self.node_pid,
                                {"node_index": self.node_index}))
        return peer

    def _from_node(self, client: Client, msg: tuple) -> None:
        op = msg[0]
        st = self.state
        index = client.node_index
        if op == P.FORWARD:
            _, spec, fn, vals = msg
            if fn is not None:
                st.register_fn(spec[P.S_FID], fn)
            st.accept_forward(client, spec, [self._local(v) for v in vals])
        elif op == P.RESULTS:
            _, task_id, ok, vals, t0, t1, pid = msg
            st.remote_result(index, task_id, ok, [self._local(v) for v in vals], t0, t1, pid)
        elif op == P.FETCH:
            st.get_request(client, msg[1])
        elif op == P.VALUE:
            st.value_arrived(self._local(msg[1]))
        elif op == P.NODE_STARTED:
            st.remote_started(msg[1], msg[2])
        elif op == P.NODE_REFS:
            st.refs(client, msg[1])
        elif op == P.CANCEL:
            st.cancel(msg[1], msg[2])
        elif op == P.KILL_ACTOR:
            st.kill_actor(msg[1], msg[2])
        elif op == P.ACTOR_EVENT:
            st.hosted_actor_event(index, msg[1], msg[2], msg[3])
        elif op == P.RELAY:
            target = st.notices.jobs.get(msg[1])
            if target is not None:
                self.server.send(target.peer, msg[2])
        else:
            log.warning("nbdist node: unknown message %r from node %d", op, index)

    def spawn_worker(self, actor: bool = False) -> Worker | None:
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:  # the worker process
            parent_sock.close()
            self._become_worker(child_sock, 0 if actor else self.cfg.worker_nice)
        child_sock.close()
        worker = Worker(pid)
        peer = self.server.adopt(parent_sock)
        self.worker_peers[peer.fd] = worker
        local = self.next_local
        self.next_local += 1
        client = Client(peer, P.KIND_WORKER, ids.client_no(self.node_index, local), pid, 0)
        peer.info = client
        client.worker = worker
        worker.client = client
        self.state.worker_started(worker)
        self.state.notices.everyone(ev.WorkerUp, (self.node_id, pid))
        return worker

    def _become_worker(self, sock: socket.socket, nice: int) -> None:
        code = 1
        try:
            fd = sock.fileno()
            os.closerange(3, fd)
            os.closerange(fd + 1, 65536)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            lifetime.die_with_parent()
            lifetime.lower_priority(nice)
            from . import worker

            info = self.welcome_info()
            info["client_no"] = ids.client_no(self.node_index, self.next_local)
            worker.main(sock, self.secret, info)
            code = 0
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            os._exit(code)

    def kill_worker(self, worker: Worker, graceful: bool = False) -> None:
        if graceful and worker.client is not None and worker.client.peer is not None:
            self.server.send(worker.client.peer, (P.EXIT,))
            return
        try:
            os.kill(worker.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def interrupt_worker(self, worker: Worker) -> None:
        try:
            os.kill(worker.pid, signal.SIGINT)
        except ProcessLookupError:
            pass

    def commit_arena(self, start: int, end: int) -> bool:
        return self.arena is not None and self.arena.commit(start, end)

    def spill_range(self, oid: int, offset: int, size: int) -> str | None:
        assert self.arena is not None
        path = self._spill_path(oid)
        try:
            with open(path, "wb") as f:
                f.write(self.arena.read(offset, size))
        except OSError as exc:
            log.error("nbdist node: cannot spill object %x to %s: %s", oid, path, exc)
            unlink_file(path)
            return None
        return path

    def restore_range(self, oid: int, path: str, offset: int, size: int) -> bool:
        assert self.arena is not None
        try:
            with open(path, "rb", buffering=0) as f:
                got = f.readinto(self.arena.view[offset:offset + size])
        except OSError as exc:
            log.error("nbdist node: cannot restore object %x from %s: %s", oid, path, exc)
            return False
        if got != size:
            log.error("nbdist node: spill file %s of object %x is short", path, oid)
            return False
        unlink_file(path)
        return True

    def unlink(self, oid: int) -> None:
        unlink_file(os.path.join(self.shm_dir, P.shm_name(self.node_pid, oid)))

    def to_head(self, op: str, args: Any) -> None:
        if self.head is not None:
            self.server.send(self.head, (P.HEAD_REQUEST, 0, op, args))

    def resources_changed(self) -> None:
        self.res_dirty = True

    # ---------------------------------------------------------------- messages
    def welcome_info(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "node_pid": self.node_pid,
            "node_index": self.node_index,
            "shm_dir": self.shm_dir,
            "config": self.cfg.to_dict(),
            "resources": dict(self.state.placement.total),
            "address": self.address,
            "local_address": self.local_address,
            "hostname": socket.gethostname(),
            "boot_id": lifetime.boot_id(),
            "workers": [w.pid for w in self.state.workers.workers.values()],
            "arena": (self.arena.path, self.arena.size) if self.arena is not None else None,
        }

    def on_messages(self, peer: transport.Peer, msgs: list[Any]) -> None:
        client = peer.info
        if client is None:
            self._hello(peer, msgs[0])
            msgs = msgs[1:]
            client = peer.info
            if client is None:
                return
        if client == "head":
            for msg in msgs:
                self._from_head(msg)
            return
        if isinstance(client, tuple):  # our connection to another node: only its WELCOME
            return
        if client.kind == P.KIND_NODE:
            for msg in msgs:
                self._from_node(client, msg)
            return
        st = self.state
        for msg in msgs:
            op = msg[0]
            if op == P.SUBMIT:
                st.submit(client, msg[1])
            elif op == P.REFS:
                st.refs(client, msg[1])
            elif op == P.RESULT:
                worker = client.worker
                if worker is not None:
                    _, task_id, ok, locs, error, t0, t1 = msg
                    st.result(worker, task_id, ok, locs, error, t0, t1)
            elif op == P.GET_REQ:
                st.get_request(client, msg[1])
            elif op == P.DIRECT_RESULT:
                _, task_id, job, locs, t0, t1 = msg
                st.direct_result(client, task_id, job, locs, t0, t1)
            elif op == P.PUT:
                st.put(client, msg[1], msg[2], msg[3], msg[4], msg[5] if len(msg) > 5 else -1)
            elif op == P.UNPIN:
                st.objects.unpin(client, msg[1])
            elif op == P.REGISTER_FN:
                st.register_fn(msg[1], msg[2])
            elif op == P.STDOUT:
                self._stdout(client, msg)
            elif op == P.BLOCKED:
                if client.worker is not None:
                    st.blocked(client.worker)
            elif op == P.UNBLOCKED:
                if client.worker is not None:
                    st.unblocked(client.worker)
            elif op == P.CANCEL:
                st.cancel(msg[1], msg[2])
            elif op == P.KILL_ACTOR:
                st.kill_actor(msg[1], msg[2])
            elif op == P.CONTROL:
                self._control(client, msg[1], msg[2], msg[3])
            else:
                log.warning("nbdist node: unknown message %r from %s", op, client.pid)

    def _hello(self, peer: transport.Peer, msg: Any) -> None:
        if not (isinstance(msg, tuple) and len(msg) == 5 and msg[0] == P.HELLO):
            self.server.drop(peer, "first message was not HELLO")
            return
        _, version, kind, pid, info = msg
        if version != P.PROTOCOL_VERSION:
            self.server.send(peer, (P.WELCOME, P.PROTOCOL_VERSION, 0, {"error": (
                f"protocol version {version} is not supported (node speaks "
                f"{P.PROTOCOL_VERSION}); use the same nbdist version everywhere")}))
            self.server.flush()
            self.server.drop(peer, "protocol version mismatch")
            return
        local = self.next_local
        self.next_local += 1
        client_no = ids.client_no(self.node_index, local)
        client = Client(peer, kind, client_no, pid, client_no)
        if kind == P.KIND_NODE:
            client.job = 0
            client.node_index = int(info.get("node_index", 0))
            self.node_clients[client.node_index] = client
        peer.info = client
        self.state.client_joined(client)
        self.server.send(peer, (P.WELCOME, P.PROTOCOL_VERSION, client_no, self.welcome_info()))

    def _stdout(self, client: Client, msg: tuple) -> None:
        _, task_id, stream, text = msg
        name, job = self.state.task_name(task_id)
        target = self.state.notices.jobs.get(job)
        msg = (P.LOG, task_id, name, client.pid, stream, text)
        if target is not None:
            self.server.send(target.peer, msg)
        elif job >> 20 not in (0, self.node_index):
            self.to_node(job >> 20, (P.RELAY, job, msg))

    def _control(self, client: Client, req_id: int, op: str, args: Any) -> None:
        if op == "reserve":
            oid, size = args[0], args[1]
            error = self.state.objects.reserve(client, oid, size, len(args) > 2 and args[2])
            grant = client.grants.get(oid)
            self.server.send(client.peer, (P.CONTROL_REPLY, req_id, error is None,
                                           (grant[0] if grant else -1) if error is None else
                                           f"ObjectStoreFullError: {error}"))
            return
        if op == "spilled":  # which objects are on disk now (for the panel), at most 10,000
            spilled = [f"{oid:018x}" for oid in self.state.objects.spilled_ids(10_000)]
            self.server.send(client.peer, (P.CONTROL_REPLY, req_id, True, spilled))
            return
        if op == "node_info":
            snap = self.state.snapshot()
            snap.update(self.welcome_info())
            self.server.send(client.peer, (P.CONTROL_REPLY, req_id, True, snap))
            return
        if self.head is None:
            if self.head_lost:
                self.server.send(client.peer, (P.CONTROL_REPLY, req_id, False,
                                               "the head is not reachable from this node"))
            else:
                self.head_waiting.append((client, req_id, op, args))
            return
        self._push_update()
        self.head_token += 1
        self.head_pending[self.head_token] = (client, req_id)
        self.server.send(self.head, (P.HEAD_REQUEST, self.head_token, op, args))

    def _from_head(self, msg: Any) -> None:
        if msg[0] == P.CLUSTER_VIEW:
            self.view = msg[1]
            self.state.set_cluster_view(msg[1])
            for index in [i for i in self.out_queue if not self._listed_alive(i)]:
                self._node_gone(index)
            return
        if msg[0] == P.HEAD_REPLY:
            _, token, ok, result = msg
            pending = self.head_pending.pop(token, None)
            if pending is not None:
                client, req_id = pending
                self.server.send(client.peer, (P.CONTROL_REPLY, req_id, ok, result))

    def on_close(self, peer: transport.Peer) -> None:
        client = peer.info
        if client == "head":
            self.head = None
            self.head_lost = True
            self._fail_waiting()
            log.error("nbdist node: lost the head; cluster queries fail until it returns")
            return
        if isinstance(client, tuple):
            index = client[1]
            if self.node_out.get(index) is peer:
                del self.node_out[index]
                self.sent_fns.pop(index, None)
                self._node_gone(index)
            return
        if isinstance(client, Client) and client.kind == P.KIND_NODE:
            if self.node_clients.get(client.node_index) is client:
                del self.node_clients[client.node_index]
            self.state.client_left(client)
            return
        worker = self.worker_peers.pop(peer.fd, None)
        if worker is not None:
            code = self._reap(worker.pid)
            sock_dir = links.socket_dir({"local_address": self.local_address})
            if sock_dir:  # its endpoint for direct calls, if it hosted an actor
                unlink_file(links.endpoint_path(sock_dir, worker.pid))
            self.state.worker_lost(worker, code)
        if isinstance(client, Client):
            self.state.client_left(client)
            if client.pid:  # its warm files (store.write), if it died with one
                lifetime.remove_files_with_prefix(
                    self.shm_dir, P.warm_name(self.node_pid, client.pid) + "-")

    def _reap(self, pid: int) -> int | None:
        try:
            got, status = os.waitpid(pid, os.WNOHANG)
            if got == 0:
                os.kill(pid, signal.SIGKILL)
                got, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status)
        except (ChildProcessError, ProcessLookupError):
            return None

    def on_iteration(self) -> None:
        st = self.state
        if st.placement.need_dispatch:
            st.dispatch()
        if st.placement.parked and not self._parked_timer:
            self._parked_timer = True
            self.server.call_later(0.25, self._expire_parked)
        if st.has_notices() and not self._notice_timer:
            self._notice_timer = True
            self.server.call_later(NOTICE_S, self._flush_notices)
        if not self.res_dirty and (st.objects.store_used, len(st.objects), len(st.tasks)) != self._reported:
            self.res_dirty = True  # the store or the task count changed: report it too
        if self.res_dirty and self.head is not None and not self._update_timer:
            self._update_timer = True
            self.server.call_later(0.05, self._push_update)

    _update_timer = False
    _notice_timer = False
    _parked_timer = False

    def _expire_parked(self) -> None:
        self._parked_timer = False
        self.state.expire_parked(time.monotonic())
    _reported: tuple[int, int, int] = (0, 0, 0)

    def _flush_notices(self) -> None:
        self._notice_timer = False
        self.state.flush_notices()

    def _push_update(self) -> None:
        self._update_timer = False
        if self.head is not None and self.res_dirty:
            self.res_dirty = False
            st = self.state
            self._reported = (st.objects.store_used, len(st.objects), len(st.tasks))
            self.server.send(self.head, (P.NODE_UPDATE, st.snapshot()))

    # ---------------------------------------------------------------- lifecycle
    def connect_head(self, deadline: float = 0.0) -> None:
        """Connect to the head, retrying from the loop so local work is served meanwhile."""
        deadline = deadline or time.monotonic() + 30.0
        try:
            sock = transport.connect(self.args.head, self.secret)
        except transport.TransportError as exc:
            # Reached the head, but the handshake failed: retrying cannot help.
            log.error("nbdist node: the head at %s refused this node: %s. Pass the cluster's "
                      "token (--token or NBDIST_TOKEN).", self.args.head, exc)
            self.head_lost = True
            self.exit_code = 3
            self._fail_waiting()
            self.server.stop()
            return
        except OSError as exc:
            if time.monotonic() > deadline:
                log.error("nbdist node: cannot reach the head at %s: %s", self.args.head, exc)
                self.head_lost = True
                self.exit_code = 3
                self._fail_waiting()
                self.server.stop()
                return
            self.server.call_later(0.005, lambda: self.connect_head(deadline))
            return
        peer = self.server.adopt(sock, authed=True)
        peer.info = "head"
        self.head = peer
        info = self.welcome_info()
        info.update(self.state.snapshot())
        info["pid"] = self.node_pid
        self.server.send(peer, (P.NODE_REGISTER, info))
        waiting, self.head_waiting = self.head_waiting, []
        for client, req_id, op, args in waiting:
            if client.peer is not None and not client.peer.closed:
                self._control(client, req_id, op, args)

    def _fail_waiting(self) -> None:
        waiting, self.head_waiting = self.head_waiting, []
        for client, req_id, _op, _args in waiting:
            if client.peer is not None and not client.peer.closed:
                self.server.send(client.peer, (P.CONTROL_REPLY, req_id, False,
                                               "the head is not reachable from this node"))

    def parent_gone(self) -> None:
        try:
            data = os.read(self.args.parent_fd, 64)
        except OSError:
            data = b""
        if not data:
            self.server.stop()

    def shutdown(self) -> None:
        for worker in list(self.state.workers.workers.values()):
            try:
                os.kill(worker.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in [w.pid for w in self.worker_peers.values()]:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        lifetime.remove_shm_of(self.shm_dir, self.node_pid)
        if self.spill_dir:
            shutil.rmtree(self.spill_dir, ignore_errors=True)
        self.server.close()
        for where in (self.address, self.local_address):
            if where.startswith("unix:"):
                unlink_file(where[5:])


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="nbdist-node")
    p.add_argument("--listen", required=True, action="append",
                   help="unix:/path or tcp:host:port (repeat to listen on more than one; the "
                        "first is the address the node announces, a unix: one serves local "
                        "drivers)")
    p.add_argument("--head", required=True)
    p.add_argument("--num-cpus", type=float, default=os.cpu_count() or 1)
    p.add_argument("--num-gpus", type=float, default=0)
    p.add_argument("--resources", default="{}")
    p.add_argument("--node-index", type=int, default=1)
    p.add_argument("--parent-fd", type=int, default=-1)
    p.add_argument("--ready-file", default="")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s node %(levelname)s %(message)s")
    if os.environ.pop("NBDIST_DEATHSIG", "1") == "1":
        lifetime.die_with_parent(signal.SIGTERM)
    secret = bytes.fromhex(os.environ.pop("NBDIST_CLUSTER_SECRET"))
    cfg = config_mod.Config.from_dict(json.loads(os.environ.pop("NBDIST_CONFIG", "{}")))
    if cfg.tls_cert:
        transport.configure_tls(cfg.tls_cert, cfg.tls_key, cfg.tls_ca)
    for entry in json.loads(os.environ.pop("NBDIST_DRIVER_SYS_PATH", "[]")):
        if entry not in sys.path:
            sys.path.append(entry)
    lifetime.sweep_stale_shm(cfg.shm_dir)
    lifetime.sweep_stale_spill(cfg.spill_dir or tempfile.gettempdir())
    daemon = NodeDaemon(args, secret, cfg)
    signal.signal(signal.SIGTERM, lambda *_: daemon.server.stop())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for i, where in enumerate(args.listen):
        lsock = transport.listen(where)
        bound = transport.bound_address(lsock)
        if i == 0:
            daemon.address = bound
        if bound.startswith("unix:"):
            daemon.local_address = bound
        daemon.server.add_listener(lsock)
    if args.parent_fd >= 0:
        daemon.server.add_reader(args.parent_fd, daemon.parent_gone)
    # Pages shared with forked workers stay shared if the collector does not touch them.
    gc.freeze()
    for _ in range(int(args.num_cpus)):
        daemon.spawn_worker()
    try:
        daemon.connect_head()
        if args.ready_file:
            with open(args.ready_file + ".tmp", "w") as f:
                f.write(daemon.address)
            os.replace(args.ready_file + ".tmp", args.ready_file)
        daemon.server.run()
    finally:
        daemon.shutdown()
    return daemon.exit_code


if __name__ == "__main__":
    raise SystemExit(main())

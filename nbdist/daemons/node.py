"""The node daemon: one per machine (layer L2).

It owns, on one thread, a `wire.server.Server` loop and the `scheduler.NodeState` it feeds:
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
import os
import signal
import socket
import sys
import tempfile
import time
from typing import Any

from nbdist import config as config_mod
from nbdist import events as ev
from nbdist import ids
from nbdist.cluster import lifetime
from nbdist.daemons import node_guard
from nbdist.daemons.memory_monitor import MemoryMonitor
from nbdist.daemons.node_files import NodeFiles
from nbdist.daemons.node_peers import NodePeers
from nbdist.objects.store import unlink as unlink_file
from nbdist.scheduler import Client, NodeState, Task, Worker
from nbdist.wire import links, server, transport
from nbdist.wire import protocol as P

log = logging.getLogger("nbdist.daemons.node")

# Task-started and object-freed notices go out at most this often (batched); the panel
# redraws at ~10 Hz, and tasks shorter than this need no separate notice at all.
NOTICE_S = 0.02


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
        self.server = server.Server(
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
        # A task no node can run stays pending for a while, as Ray keeps it (a wait or a get
        # with a timeout sees it not ready; a node may join): see NodeState.parked.
        self.state.placement.infeasible_wait = cfg.infeasible_wait_s
        self.state.objects.spill_limit = cfg.spill_max_bytes
        self.state.notices.node_id = self.node_id  # named by its event records
        self.next_local = 1
        self.worker_peers: dict[int, Worker] = {}
        self.head: server.Peer | None = None
        self.head_pending: dict[int, tuple[Client, int]] = {}
        self.head_token = 0
        # Cluster queries that arrive while the head connection is still being made wait here.
        self.head_waiting: list[tuple[Client, int, str, Any]] = []
        # Step commands answered when the tasks they released have ended (`_step`).
        self.step_replies: list[tuple[Client, int, dict, list[Task]]] = []
        self.head_lost = False
        self.peers = NodePeers(self)  # the other nodes
        self.res_dirty = False
        self.address = ""
        self.local_address = ""
        self.stopping = False
        self.exit_code = 0
        self.files = NodeFiles(cfg, self.node_pid)  # shared memory, spill files
        self.server.alloc = self.files.receive_file
        self.arena = self.files.arena
        if self.arena is not None:
            self.state.objects.enable_arena(self.arena.size)
        self.memory = MemoryMonitor(cfg.memory_usage_threshold, cfg.memory_monitor_refresh_ms)
        if self.memory.enabled:
            self.server.call_later(self.memory.interval, self._check_memory)

    # ---------------------------------------------------------------- NodeIO
    def send(self, client: Client, msg: tuple) -> None:
        if client.kind == P.KIND_NODE:
            self.peers.send(client, msg)
        elif client.peer is not None:
            self.server.send(client.peer, msg)

    def forward(self, index: int, spec: tuple, dep_locs: list) -> None:
        self.peers.forward(index, spec, dep_locs)

    def to_node(self, index: int, msg: tuple) -> None:
        self.peers.to_node(index, msg)

    # The files: NodeFiles does the I/O.
    def spill(self, oid: int, size: int) -> str | None:
        return self.files.spill(oid, size)

    def restore(self, oid: int, path: str) -> bool:
        return self.files.restore(oid, path)

    def remove_spill(self, path: str) -> None:
        self.files.remove_spill(path)

    def commit_arena(self, start: int, end: int) -> bool:
        return self.files.commit_arena(start, end)

    def spill_range(self, oid: int, offset: int, size: int) -> str | None:
        return self.files.spill_range(oid, offset, size)

    def restore_range(self, oid: int, path: str, offset: int, size: int) -> bool:
        return self.files.restore_range(oid, path, offset, size)

    def unlink(self, oid: int) -> None:
        self.files.unlink(oid)

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
            from nbdist.daemons import worker

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

    def on_messages(self, peer: server.Peer, msgs: list[Any]) -> None:
        client = peer.info
        if client is None:
            try:
                self._hello(peer, msgs[0])
            except Exception as exc:
                self.server.drop(peer, node_guard.describe(msgs[0], exc))
                return
            msgs = msgs[1:]
            client = peer.info
            if client is None:
                return
        if client == "head":
            for msg in msgs:
                try:
                    self._from_head(msg)
                except Exception as exc:
                    node_guard.skip("the head", msg, exc)
            return
        if isinstance(client, tuple):  # our connection to another node: only its WELCOME
            return
        if client.kind == P.KIND_NODE:
            for msg in msgs:
                try:
                    self.peers.on_message(client, msg)
                except Exception as exc:
                    node_guard.skip(f"node {client.node_index}", msg, exc)
            return
        for msg in msgs:
            try:
                self._on_client_message(client, msg)
            except Exception as exc:
                if not node_guard.refuse(self, client, msg, exc):
                    return

    def _on_client_message(self, client: Client, msg: Any) -> None:
        st = self.state
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
            st.get_request(client, msg[1], len(msg) > 2 and msg[2])
        elif op == P.LOCATE:
            st.objects.locate(client, msg[1])
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
        elif op == P.RUNS:
            self.to_job(msg[1], (P.EVENT, msg[2]))
        elif op == P.BLOCKED:
            if client.worker is not None:
                st.blocked(client.worker)
        elif op == P.UNBLOCKED:
            if client.worker is not None:
                st.unblocked(client.worker)
        elif op == P.CANCEL:
            if len(msg) > 4 and msg[4]:  # the tasks a direct actor call submitted
                st.cancel_children_of(msg[1] - 1, msg[2])
            else:
                st.cancel(msg[1], msg[2], len(msg) < 4 or msg[3])
        elif op == P.KILL_ACTOR:
            st.kill_actor(msg[1], msg[2], msg[3] if len(msg) > 3 else None)
        elif op == P.CONTROL:
            self._control(client, msg[1], msg[2], msg[3])
        else:
            log.warning("nbdist node: unknown message %r from %s", op, client.pid)

    def _hello(self, peer: server.Peer, msg: Any) -> None:
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
            self.peers.node_clients[client.node_index] = client
        peer.info = client
        self.state.client_joined(client)
        self.server.send(peer, (P.WELCOME, P.PROTOCOL_VERSION, client_no, self.welcome_info()))

    def _stdout(self, client: Client, msg: tuple) -> None:
        _, task_id, stream, text, *label = msg
        name, job = self.state.task_name(task_id)
        name = label[0] if label else name  # the actor's own repr (worker.actor_label)
        self.to_job(job, (P.LOG, task_id, name, client.pid, stream, text))

    def to_job(self, job: int, msg: tuple) -> None:
        """``msg`` to the driver of ``job``: on this node, or relayed to the driver's node."""
        target = self.state.notices.jobs.get(job)
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
        if op == "step":
            self._step(client, req_id, args)
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

    def _step(self, client: Client, req_id: int, args: Any) -> None:
        """A driver's step-through command: ``(on, release, wait)``; with ``wait`` the reply
        goes when the released tasks have ended (checked once per loop turn), so a notebook
        stepping level by level sees each level finish before it steps the next."""
        on, release, wait = args
        reply, released = self.state.step(client, on, release)
        if wait and released:
            self.step_replies.append((client, req_id, reply, released))
        else:
            self.server.send(client.peer, (P.CONTROL_REPLY, req_id, True, reply))

    def _answer_steps(self) -> None:
        waiting = []
        for item in self.step_replies:
            client, req_id, reply, released = item
            if all(task.finished for task in released):
                # What their ends made ready is held by now: count it.
                reply["held"] = self.state.stepper.held_count(client.client_no)
                if client.peer is not None:
                    self.server.send(client.peer, (P.CONTROL_REPLY, req_id, True, reply))
            else:
                waiting.append(item)
        self.step_replies = waiting

    def _from_head(self, msg: Any) -> None:
        if msg[0] == P.GROUP:
            reply = self.state.group_message(msg)
            if reply is not None:
                self.to_head("group_prepared", reply)
            return
        if msg[0] == P.CLUSTER_VIEW:
            self.peers.set_view(msg[1])  # first: parked work may be forwarded to a new node
            self.state.set_cluster_view(msg[1])
            return
        if msg[0] == P.HEAD_REPLY:
            _, token, ok, result = msg
            pending = self.head_pending.pop(token, None)
            if pending is not None:
                client, req_id = pending
                self.server.send(client.peer, (P.CONTROL_REPLY, req_id, ok, result))

    def on_close(self, peer: server.Peer) -> None:
        client = peer.info
        if client == "head":
            self.head = None
            self.head_lost = True
            self._fail_waiting()
            log.error("nbdist node: lost the head; cluster queries fail until it returns")
            return
        if isinstance(client, tuple):
            self.peers.connection_closed(client[1], peer)
            return
        if isinstance(client, Client) and client.kind == P.KIND_NODE:
            if self.peers.node_clients.get(client.node_index) is client:
                del self.peers.node_clients[client.node_index]
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
        if self.step_replies:
            self._answer_steps()
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

    def _check_memory(self) -> None:
        self.server.call_later(self.memory.interval, self._check_memory)
        kill = self.memory.check(self.state.workers.workers.values())
        if kill is not None:
            victim, reason = kill
            victim.oom = reason
            self.kill_worker(victim)

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
        self.files.close()
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

"""A cluster of several nodes on one machine, for tests and teaching (layer L3): Ray's
``ray.cluster_utils.Cluster``.

Each node is a real node daemon with its own store, port and workers, started as
``nbdist start --head`` / ``nbdist start --address`` start theirs (`nbdist.cluster.standalone`),
so drivers attach with ``nbdist.init(address=cluster.address)`` and ``nbdist status`` lists the
nodes. The head node is the head daemon and the first node daemon.

Every process a `Cluster` starts ends with `Cluster.shutdown`, and also when the Python process
that made the cluster dies, even by SIGKILL: the daemons hold the read end of a pipe whose write
end only this process has, and exit at its EOF (and by PR_SET_PDEATHSIG), as a driver's own
cluster does (`nbdist.cluster.local`). Their state folders (token, logs) live in the state
directory of ``nbdist start``; `shutdown` removes them, and ``nbdist stop`` removes any a dead
process left.

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    worker = cluster.add_node(num_cpus=2, resources={"beta": 1})
    nbdist.init(address=cluster.address)
    ...
    cluster.remove_node(worker)        # its tasks run again elsewhere, as after a node crash
    nbdist.shutdown(); cluster.shutdown()
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import time
from typing import Any

from nbdist.cluster import lifetime, standalone
from nbdist.exceptions import ClusterError

log = logging.getLogger(__name__)

# Ray's flag for platforms where a multi-node cluster on one machine cannot run (Windows there);
# its tests read it in their skip and xfail conditions. Here every platform nbdist runs on can.
cluster_not_supported = False

# Ray's defaults for a node of a test cluster: one CPU and a small store.
NODE_DEFAULTS: dict[str, Any] = {"num_cpus": 1, "num_gpus": 0,
                                 "object_store_memory": 150 * 2**20}
# Arguments Ray's tests pass that mean nothing here (ports, dashboards, Redis, tuning).
IGNORED_ARGS = frozenset({
    "_system_config", "include_dashboard", "dashboard_host", "dashboard_port",
    "dashboard_agent_listen_port", "min_worker_port", "max_worker_port", "node_manager_port",
    "redis_password", "redis_username", "redis_max_memory", "node_name", "labels",
    "enable_object_reconstruction", "raylet_socket_name", "plasma_store_socket_name",
    "temp_dir", "_temp_dir", "cleanup", "env_vars", "worker_port_list", "metrics_export_port",
    "ray_client_server_port", "port"})


class Node:
    """One node of a `Cluster` (what Ray's ``add_node`` returns): ``node_id`` (hex, as
    ``nbdist.nodes()`` and the runtime context name it), ``address`` (its TCP address),
    ``node_ip_address``, ``pid`` (its node daemon), ``head`` (whether it is the head node)."""

    def __init__(self, session: standalone.Session, info: dict[str, Any], head: bool) -> None:
        self._session = session
        self.node_id: str = info["node_id"]
        self.address: str = standalone.display_address(info.get("address", ""))
        self.node_ip_address: str = self.address.rpartition(":")[0] or "127.0.0.1"
        self.pid: int = session.node_pid
        self.head = head

    @property
    def unique_id(self) -> str:
        return self.node_id

    @property
    def all_processes(self) -> list[int]:
        """The pids this node started: its node daemon (and, on the head node, the head)."""
        return list(self._session.pids)

    def remaining_processes_alive(self) -> bool:
        return all(lifetime.process_running(pid) for pid in self._session.pids)

    def kill(self) -> None:
        """Kill the node daemon at once (SIGKILL), as a crash would; the cluster sees the node
        die. `Cluster.remove_node` still removes its files."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, 9)

    kill_raylet = kill  # Ray's name for the same

    def __repr__(self) -> str:
        return f"Node({self.node_id}, {self.address}{', head' if self.head else ''})"


class Cluster:
    """A multi-node cluster on this machine (Ray's ``cluster_utils.Cluster``).

    ``initialize_head``: start the head node at once, with ``head_node_args`` (the arguments of
    `add_node`); ``connect``: then attach this process as its driver (`connect`);
    ``shutdown_at_exit``: `shutdown` when the interpreter exits normally (the processes end when
    it dies in any case)."""

    def __init__(self, initialize_head: bool = False, connect: bool = False,
                 head_node_args: dict[str, Any] | None = None,
                 shutdown_at_exit: bool = True) -> None:
        if connect and not initialize_head:
            raise RuntimeError("Cannot connect to a cluster whose head is not started: pass "
                               "initialize_head=True too.")
        self.head_node: Node | None = None
        self.worker_nodes: set[Node] = set()
        self.connected = False
        self._address: str | None = None
        self._token = ""
        self._pipe_r, self._pipe_w = os.pipe()
        if shutdown_at_exit:
            atexit.register(self.shutdown)
        if initialize_head:
            self.add_node(**(head_node_args or {}))
            if connect:
                self.connect()

    # ---------------------------------------------------------------- addresses
    @property
    def address(self) -> str | None:
        """``HOST:PORT`` of the head, for ``nbdist.init(address=...)`` (None before the head
        node is added)."""
        return self._address if self.head_node is not None else None

    gcs_address = address  # Ray's other name for it

    def connect(self, namespace: str | None = None) -> None:
        """Attach this process to the cluster as a driver (``nbdist.init(address=...)``)."""
        import nbdist

        if self.address is None:
            raise RuntimeError("The cluster has no head node yet: add_node() first.")
        if self.connected:
            raise RuntimeError("This process is already connected to the cluster.")
        nbdist.init(address=self.address, namespace=namespace, ignore_reinit_error=True)
        self.connected = True

    # ---------------------------------------------------------------- nodes
    def add_node(self, wait: bool = True, **node_args: Any) -> Node:
        """Start a node: the head node first, then nodes that join it. ``num_cpus`` (default
        1), ``num_gpus`` (0), ``resources`` (custom ones), ``object_store_memory`` (bytes,
        default 150 MiB). The node has registered with the head when this returns (``wait``
        is accepted for Ray's signature; starting always waits)."""
        args = self._node_args(node_args)
        if self._pipe_w < 0:
            raise RuntimeError("This cluster was shut down; make a new Cluster.")
        if self.head_node is None:
            session = standalone.start_head("127.0.0.1", 0, parent_fd=self._pipe_r,
                                            client_port=-1, **args)
            self._address = standalone.display_address(session.head)
            self._token = session.token
        else:
            assert self._address is not None
            session = standalone.start_node(self._address, parent_fd=self._pipe_r,
                                            token=self._token, **args)
        try:
            node = Node(session, self._node_info(session), head=self.head_node is None)
        except BaseException:
            standalone.stop_session(session)
            raise
        if node.head:
            self.head_node = node
        else:
            self.worker_nodes.add(node)
        return node

    @staticmethod
    def _node_args(node_args: dict[str, Any]) -> dict[str, Any]:
        known = ("num_cpus", "num_gpus", "resources", "object_store_memory")
        unknown = sorted(set(node_args) - set(known) - IGNORED_ARGS)
        if unknown:
            raise TypeError(f"add_node() got unexpected argument(s) {', '.join(unknown)}; "
                            f"nbdist's nodes take {', '.join(known)}.")
        args = {**NODE_DEFAULTS, **{k: node_args[k] for k in known if k in node_args}}
        for key in ("num_cpus", "num_gpus", "object_store_memory"):
            if args[key] is None:
                args[key] = NODE_DEFAULTS[key]
        if args.get("resources") is not None:
            args["resources"] = {str(k): float(v) for k, v in args["resources"].items()}
        return args

    def _head_nodes(self) -> list[dict[str, Any]]:
        assert self._address is not None
        secret = bytes.fromhex(self._token)
        return list(standalone.head_request(self._address, secret, "nodes"))

    def _node_info(self, session: standalone.Session) -> dict[str, Any]:
        for info in self._head_nodes():
            if info.get("pid") == session.node_pid:
                return info
        raise ClusterError(f"The node daemon (pid {session.node_pid}) is not known to the "
                           "head it joined.")

    def remove_node(self, node: Node, allow_graceful: bool = True) -> None:
        """Stop ``node``'s processes (SIGTERM, or SIGKILL at once when not
        ``allow_graceful``) and remove its files. Removing the node this process is attached
        to as a driver is refused (the driver is disconnected first, as Ray does)."""
        if node is not self.head_node and node not in self.worker_nodes:
            raise ValueError(f"{node!r} is not a node of this cluster.")
        if self._attached_to(node):
            import nbdist

            nbdist.shutdown()
            self.connected = False
            raise ValueError("Removing the node this driver is attached to would break the "
                             "driver: it was disconnected. Remove another node instead.")
        standalone.stop_session(node._session, grace=standalone.STOP_GRACE_S,
                                force=not allow_graceful)
        if node is self.head_node:
            self.head_node = None
        else:
            self.worker_nodes.discard(node)

    @staticmethod
    def _attached_to(node: Node) -> bool:
        import nbdist

        if not nbdist.is_initialized():
            return False
        try:
            return bool(nbdist.get_runtime_context().get_node_id() == node.node_id)
        except Exception:  # a driver of another backend: not ours
            return False

    def wait_for_nodes(self, timeout: float = 30) -> None:
        """Wait until the head counts as many live nodes as were added and not removed;
        TimeoutError if it does not within ``timeout`` s (a node that died on its own,
        without `remove_node`, is such a case)."""
        if self.head_node is None:
            return
        expected = len(self.list_all_nodes())
        deadline = time.monotonic() + timeout
        alive = -1
        while True:
            alive = sum(1 for n in self._head_nodes() if n.get("alive"))
            if alive == expected:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"Timed out after {timeout:g} s waiting for the cluster's "
                                   f"nodes: {alive} alive, {expected} expected.")
            time.sleep(0.05)

    def list_all_nodes(self) -> list[Node]:
        """The head node (first) and the other nodes."""
        nodes = sorted(self.worker_nodes, key=lambda n: n.pid)
        return ([self.head_node] if self.head_node is not None else []) + nodes

    def remaining_processes_alive(self) -> bool:
        return all(node.remaining_processes_alive() for node in self.list_all_nodes())

    # ---------------------------------------------------------------- the end
    def shutdown(self) -> None:
        """Stop every node (the others first, then the head node) and remove their files; a
        driver in this process attached to the cluster is disconnected first."""
        if self._pipe_w < 0:
            return
        if any(self._attached_to(n) for n in self.list_all_nodes()):
            import nbdist

            nbdist.shutdown()
        self.connected = False
        for node in sorted(self.worker_nodes, key=lambda n: n.pid):
            self.remove_node(node)
        if self.head_node is not None:
            self.remove_node(self.head_node)
        os.close(self._pipe_w)
        os.close(self._pipe_r)
        self._pipe_w = self._pipe_r = -1
        atexit.unregister(self.shutdown)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

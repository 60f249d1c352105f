"""The node daemon's links to the other nodes of its cluster (layer L2).

Each pair of nodes talks over two connections: each sends on the one it made and receives on
the other's. `NodePeers` holds this node's outgoing connections, the head's view of the cluster
(``view``: index -> the node's record), the functions already sent to each node, and the
messages waiting for a node the head lists alive but that did not answer yet; it turns
scheduler messages for a node-client into node-to-node messages (values made portable by
`NodeFiles`) and the other nodes' messages into calls on the scheduler. Node indexes are never
reused: a node lost is lost for good.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from nbdist.scheduler import Client
from nbdist.wire import protocol as P
from nbdist.wire import server, transport

if TYPE_CHECKING:
    from nbdist.daemons.node import NodeDaemon

log = logging.getLogger("nbdist.daemons.node")

# Connecting to another node that the head lists alive but that did not answer: first retry
# after RECONNECT_FIRST_S, then doubling up to RECONNECT_MAX_S; each try waits at most
# RECONNECT_TIMEOUT_S (it blocks this loop, so it is kept short).
RECONNECT_FIRST_S = 0.2
RECONNECT_MAX_S = 5.0
RECONNECT_TIMEOUT_S = 2.0


class NodePeers:
    """The other nodes, as seen from one node daemon (``d``)."""

    def __init__(self, daemon: NodeDaemon) -> None:
        self.d = daemon
        self.view: dict[int, dict[str, Any]] = {}
        self.node_out: dict[int, server.Peer] = {}  # our connection to each
        self.node_clients: dict[int, Client] = {}  # the Client each is known by here
        self.sent_fns: dict[int, set[int]] = {}
        self.lost_nodes: set[int] = set()
        # Messages for a node the head lists alive but that we could not connect to (yet):
        # sent in order once a retry connects; dropped when the head says it is gone.
        self.out_queue: dict[int, list[tuple]] = {}

    def _portable(self, loc: tuple, index: int) -> tuple:
        return self.d.files.portable(loc, index, self.view.get(index) or {})

    def set_view(self, view: dict[int, dict[str, Any]]) -> None:
        self.view = view
        for index in [i for i in self.out_queue if not self.listed_alive(i)]:
            self.node_gone(index)

    def connection_closed(self, index: int, peer: server.Peer) -> None:
        if self.node_out.get(index) is peer:
            del self.node_out[index]
            self.sent_fns.pop(index, None)
            self.node_gone(index)

    def send(self, client: Client, msg: tuple) -> None:
        op = msg[0]
        index = client.node_index
        if op == P.DONE:
            _, task_id, ok, locs, t0, t1, pid = msg
            vals = [self._portable(loc, index) for loc in locs]
            # Objects of ours that the results contain stay alive for that node until it
            # lets go (NODE_REFS).
            mine = [c for v in vals for c in v[3] if c >> P.OWNER_SHIFT == self.d.node_index]
            if mine:
                self.d.state.refs(client, [(1, c) for c in mine])
            self.to_node(index, (P.RESULTS, task_id, ok, vals, t0, t1, pid))
        elif op == P.OBJ:
            self.to_node(index, (P.VALUE, self._portable(msg[1], index)))
        elif op == P.PRESENT:
            self.to_node(index, msg)
        elif op == P.STARTED:
            self.to_node(index, (P.NODE_STARTED, [item[:2] for item in msg[1]], msg[2]))
        else:
            log.debug("nbdist node: nothing to send node %d for message %r", index, op)

    def forward(self, index: int, spec: tuple, dep_locs: list) -> None:
        fid = spec[P.S_FID]
        sent = self.sent_fns.setdefault(index, set())
        fn = None
        if fid and fid not in sent:
            fn = self.d.state.tasks.fns.get(fid)
            sent.add(fid)
        self.to_node(index, (P.FORWARD, spec, fn, [self._portable(loc, index) for loc in dep_locs]))

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
                if self.listed_alive(index):
                    # A refused or unroutable connection is not a dead node: the head, which
                    # holds a connection to every node, decides that. Try again meanwhile.
                    self.out_queue[index] = [msg]
                    self._retry_connect(index, RECONNECT_FIRST_S)
                else:
                    self.node_gone(index)
                return
        self.d.server.send(peer, msg)

    def listed_alive(self, index: int) -> bool:
        info = self.view.get(index)
        return bool(info and info.get("alive"))

    def _retry_connect(self, index: int, delay: float) -> None:
        def attempt() -> None:
            if index in self.lost_nodes or index not in self.out_queue or self.d.stopping:
                return
            if not self.listed_alive(index):
                self.out_queue.pop(index, None)
                self.node_gone(index)
                return
            peer = self._connect_node(index, timeout=RECONNECT_TIMEOUT_S)
            if peer is None:
                self._retry_connect(index, min(delay * 2, RECONNECT_MAX_S))
                return
            log.info("nbdist node: reached node %d again", index)
            for queued in self.out_queue.pop(index):
                self.d.server.send(peer, queued)

        self.d.server.call_later(delay, attempt)

    def node_gone(self, index: int) -> None:
        self.out_queue.pop(index, None)
        if index not in self.lost_nodes:
            self.lost_nodes.add(index)
            self.d.state.node_lost(index)

    def _connect_node(self, index: int, timeout: float = 0.0) -> server.Peer | None:
        info = self.view.get(index)
        if info is None or not info.get("alive"):
            log.warning("nbdist node: node %d is not in the cluster", index)
            return None
        address = str(info["address"])
        if address.startswith("tcp:0.0.0.0:"):
            address = "tcp:127.0.0.1:" + address.rsplit(":", 1)[1]
        try:
            sock = transport.connect(address, self.d.secret,
                                     timeout or self.d.cfg.handshake_timeout_s)
        except OSError as exc:
            if index not in self.out_queue:  # once per outage, not per retry
                log.warning("nbdist node: cannot reach node %d at %s: %s (trying again while "
                            "the head lists it)", index, address, exc)
            return None
        peer = self.d.server.adopt(sock, authed=True)
        peer.info = ("node_out", index)
        self.node_out[index] = peer
        self.d.server.send(peer, (P.HELLO, P.PROTOCOL_VERSION, P.KIND_NODE, self.d.node_pid,
                                {"node_index": self.d.node_index}))
        return peer

    def on_message(self, client: Client, msg: tuple) -> None:
        op = msg[0]
        st = self.d.state
        index = client.node_index
        if op == P.FORWARD:
            _, spec, fn, vals = msg
            if fn is not None:
                st.register_fn(spec[P.S_FID], fn)
            st.accept_forward(client, spec, [self.d.files.local(v) for v in vals])
        elif op == P.RESULTS:
            _, task_id, ok, vals, t0, t1, pid = msg
            st.remote_result(index, task_id, ok, [self.d.files.local(v) for v in vals], t0, t1, pid)
        elif op == P.FETCH:
            st.get_request(client, msg[1])
        elif op == P.VALUE:
            st.value_arrived(self.d.files.local(msg[1]))
        elif op == P.LOCATE:
            st.objects.locate(client, msg[1])
        elif op == P.PRESENT:
            st.objects.present_elsewhere(msg[1])
        elif op == P.NODE_STARTED:
            st.remote_started(index, msg[1], msg[2])
        elif op == P.NODE_REFS:
            st.refs(client, msg[1])
        elif op == P.CANCEL:
            st.cancel(msg[1], msg[2], len(msg) < 4 or msg[3])
        elif op == P.KILL_ACTOR:
            st.kill_actor(msg[1], msg[2], msg[3] if len(msg) > 3 else None)
        elif op == P.ACTOR_EVENT:
            st.hosted_actor_event(index, msg[1], msg[2], msg[3])
        elif op == P.RELAY:
            target = st.notices.jobs.get(msg[1])
            if target is not None:
                self.d.server.send(target.peer, msg[2])
        else:
            log.warning("nbdist node: unknown message %r from node %d", op, index)

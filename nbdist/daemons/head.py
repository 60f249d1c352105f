"""The head: the cluster's control store (layer L2).

Holds what must be global: the node table (id, address, pid, resources total and available, as
last reported), named actors per namespace, and a small key-value table. Node daemons connect to
it and relay their clients' queries (``HEAD_REQUEST``); it is never on a task's path. One thread,
one `server.Server` loop. It exits with its parent (``--parent-fd`` EOF or PDEATHSIG).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from typing import Any

from nbdist import config as config_mod
from nbdist.cluster import lifetime
from nbdist.daemons.groups import GroupTable
from nbdist.wire import protocol as P
from nbdist.wire import server, transport

log = logging.getLogger("nbdist.daemons.head")

VIEW_S = 0.05


class Head:
    def __init__(self, secret: bytes, cfg: config_mod.Config) -> None:
        self.server = server.Server(secret, self.on_messages, self.on_close,
                                       max_frame=cfg.max_frame_bytes,
                                       handshake_timeout=cfg.handshake_timeout_s)
        self.nodes: dict[str, dict[str, Any]] = {}
        self.node_peers: dict[int, str] = {}
        self.names: dict[tuple[str, str], tuple[int, bytes]] = {}
        self.kv: dict[str, Any] = {}
        self.started = time.time()
        # Node index 1 is the node started together with the head; joining nodes ask for theirs
        # (it is the high part of every id their processes make, so it must be unique).
        self.next_node_index = 2
        self.node_conns: dict[str, server.Peer] = {}
        self._view_pending = False
        self.groups = GroupTable(self._to_node, self._alive_nodes, can_grow=False)

    def on_messages(self, peer: server.Peer, msgs: list[Any]) -> None:
        for msg in msgs:
            op = msg[0]
            if op == P.NODE_REGISTER:
                info = dict(msg[1])
                info["alive"] = True
                self.nodes[info["node_id"]] = info
                self.node_peers[peer.fd] = info["node_id"]
                peer.info = info["node_id"]
                self.next_node_index = max(self.next_node_index, info["node_index"] + 1)
                self.node_conns[info["node_id"]] = peer
                self._view_changed()
                self.groups.changed()
                log.info("node %s joined from %s (pid %s)", info["node_id"],
                         info.get("address", "?"), info.get("pid", "?"))
            elif op == P.NODE_UPDATE:
                node = self.nodes.get(peer.info)
                if node is not None:
                    node.update(msg[1])
                    self._view_changed()
                    self.groups.changed()
            elif op == P.HEAD_REQUEST:
                _, token, name, args = msg
                try:
                    result = self.handle(name, args)
                    ok = True
                except Exception as exc:
                    result, ok = f"{type(exc).__name__}: {exc}", False
                if token:
                    self.server.send(peer, (P.HEAD_REPLY, token, ok, result))

    def _view_changed(self) -> None:
        """Tell every node about the others (at most every VIEW_S): where they are and what
        they have free, for placing work that does not fit where it was submitted."""
        if not self._view_pending:
            self._view_pending = True
            self.server.call_later(VIEW_S, self._send_view)

    def _send_view(self) -> None:
        self._view_pending = False
        if len(self.node_conns) < 2 and all(n["alive"] for n in self.nodes.values()):
            return  # one node: nobody to tell
        view = {n["node_index"]: {"address": n.get("address", ""), "total": n.get("total", {}),
                                  "available": n.get("available", {}), "alive": n["alive"],
                                  "boot_id": n.get("boot_id", ""), "pid": n.get("pid", 0),
                                  "shm_dir": n.get("shm_dir", "")}
                for n in self.nodes.values()}
        for peer in self.node_conns.values():
            self.server.send(peer, (P.CLUSTER_VIEW, view))

    def _to_node(self, index: int, msg: tuple) -> None:
        for node_id, peer in self.node_conns.items():
            if self.nodes[node_id]["node_index"] == index:
                self.server.send(peer, msg)
                return

    def _alive_nodes(self) -> dict[int, dict[str, Any]]:
        return {n["node_index"]: n for n in self.nodes.values() if n["alive"]}

    def handle(self, op: str, args: Any) -> Any:
        if op.startswith("group_"):
            return self._group_request(op, args)
        if op == "nodes":
            return [dict(n) for n in self.nodes.values()]
        if op == "alloc_node_index":
            index = self.next_node_index
            self.next_node_index += 1
            return index
        if op == "head_info":
            return {"started": self.started, "pid": os.getpid(),
                    "nodes": sum(1 for n in self.nodes.values() if n["alive"])}
        if op == "cluster_resources":
            return _sum(n["total"] for n in self.nodes.values() if n["alive"])
        if op == "available_resources":
            return _sum(n["available"] for n in self.nodes.values() if n["alive"])
        if op == "register_name":
            namespace, name, actor_id, meta = args
            key = (namespace, name)
            if key in self.names:
                raise ValueError(
                    f"An actor named {name!r} already exists in namespace {namespace!r}; "
                    "choose another name, or use get_actor() to reach it.")
            self.names[key] = (actor_id, meta)
            return True
        if op == "unregister_name":
            namespace, name, actor_id = args
            if self.names.get((namespace, name), (None,))[0] == actor_id:
                del self.names[(namespace, name)]
            return True
        if op == "get_named":
            namespace, name, job = args
            if namespace is None:
                namespace = self.kv.get(f"job_namespace:{job}", "")
            entry = self.names.get((namespace, name))
            return None if entry is None else entry[1]
        if op == "list_named":
            return [{"namespace": ns, "name": n} for (ns, n) in self.names]
        if op == "kv_put":
            self.kv[args[0]] = args[1]
            return True
        if op == "kv_get":
            return self.kv.get(args)
        if op == "kv_del":
            return self.kv.pop(args, None) is not None
        if op == "kv_list":  # the entries whose key starts with ``args``
            return {k: v for k, v in self.kv.items() if k.startswith(args)}
        raise ValueError(f"unknown head request {op!r}")

    def _group_request(self, op: str, args: Any) -> Any:
        groups = self.groups
        if op == "group_create":
            if args.get("namespace") is None:  # made by a task: its job's namespace
                args["namespace"] = self.kv.get(f"job_namespace:{args.get('job')}", "")
            return groups.create(args)
        if op == "group_remove":
            return groups.remove(args)
        if op == "group_table":
            return groups.table(args)
        if op == "group_named":
            name, namespace, job = args
            if namespace is None:
                namespace = self.kv.get(f"job_namespace:{job}", "")
            return groups.named(name, namespace)
        if op == "group_prepared":
            return groups.prepared(*args)
        if op == "group_job_ended":
            return groups.job_ended(args)
        raise ValueError(f"unknown head request {op!r}")

    def on_close(self, peer: server.Peer) -> None:
        node_id = self.node_peers.pop(peer.fd, None)
        if node_id is not None and node_id in self.nodes:
            self.nodes[node_id]["alive"] = False
            self.node_conns.pop(node_id, None)
            log.warning("node %s left", node_id)
            self._view_changed()
            self.groups.node_lost(self.nodes[node_id]["node_index"])


def _sum(dicts: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0.0) + float(v)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="nbdist-head")
    p.add_argument("--listen", required=True)
    p.add_argument("--parent-fd", type=int, default=-1)
    p.add_argument("--ready-file", default="")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s head %(levelname)s %(message)s")
    if os.environ.pop("NBDIST_DEATHSIG", "1") == "1":
        lifetime.die_with_parent(signal.SIGTERM)
    secret = bytes.fromhex(os.environ.pop("NBDIST_CLUSTER_SECRET"))
    cfg = config_mod.Config.from_dict(json.loads(os.environ.pop("NBDIST_CONFIG", "{}")))
    if cfg.tls_cert:
        transport.configure_tls(cfg.tls_cert, cfg.tls_key, cfg.tls_ca)
    head = Head(secret, cfg)
    head.groups.can_grow = args.listen.startswith("tcp:")  # nodes can join (see groups.py)
    signal.signal(signal.SIGTERM, lambda *_: head.server.stop())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    lsock = transport.listen(args.listen)
    head.server.add_listener(lsock)
    if args.ready_file:
        with open(args.ready_file + ".tmp", "w") as f:
            f.write(transport.bound_address(lsock))
        os.replace(args.ready_file + ".tmp", args.ready_file)

    def parent_gone() -> None:
        try:
            data = os.read(args.parent_fd, 64)
        except OSError:
            data = b""
        if not data:
            head.server.stop()

    if args.parent_fd >= 0:
        head.server.add_reader(args.parent_fd, parent_gone)
    try:
        head.server.run()
    finally:
        head.server.close()
        if args.listen.startswith("unix:"):
            try:
                os.unlink(args.listen[5:])
            except OSError:
                pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

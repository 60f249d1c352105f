"""get_node_ip_address: the IP address of the node the caller runs on (Ray's
``ray.util.get_node_ip_address``).

With a running cluster it is the address the caller's node serves on (from ``nodes()`` and the
runtime context). A node listening on a Unix socket, or no cluster at all, means this machine
seen from itself: the loopback address, which is also what a single-machine Ray reports.
"""

from __future__ import annotations

import ipaddress

from nbdist.driver import api

LOOPBACK = "127.0.0.1"


def _host_of(address: str) -> str | None:
    host = address.rsplit(":", 1)[0].strip("[]") if ":" in address else address
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return None
    return host


def get_node_ip_address() -> str:
    """The IP address of this process's node."""
    if not api.is_initialized():
        return LOOPBACK
    node_id = api.get_runtime_context().get_node_id()
    for node in api.nodes():
        if node.get("NodeID") == node_id:
            host = _host_of(str(node.get("NodeManagerAddress", "")))
            if host is not None and host not in ("0.0.0.0", "::"):
                return host
    return LOOPBACK

"""Starting, joining and stopping clusters (layer L3).

    local.py          the embedded single-machine cluster of ``nbdist.init()``
    standalone.py     clusters that outlive a driver: ``nbdist start --head``, ``--address``, ``stop``
    lifetime.py       tying child processes to their parent's life (no orphans after a crash)
    remote.py         clusters on other machines over SSH: ``nbdist up`` / ``down``, `ssh`
    cluster_file.py   the cluster file of ``nbdist up`` (Ray's on-premise cluster config)
    ssh_host.py       the host side of ``up`` / ``down`` (``nbdist _ssh-host``)
    tls.py            the per-cluster CA and certificates ``up`` makes

Public here: ``ssh(head, workers, user=, key=)``, ``up(FILE)``, ``down(FILE)``,
``attach(FILE)``, `SSHCluster`, ``load(FILE)`` (a cluster file as a `ClusterSpec`), loaded on
first use: ``import nbdist`` does not pay for them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ClusterSpec", "SSHCluster", "attach", "down", "load", "ssh", "up"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from nbdist.cluster import remote

        return getattr(remote, name)
    raise AttributeError(f"module 'nbdist.cluster' has no attribute {name!r}")

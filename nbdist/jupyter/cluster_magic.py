"""``%nbdist up CLUSTER.yaml`` and ``%nbdist down [CLUSTER.yaml]`` (layer L4): a thin layer
over `nbdist.cluster.up` / `down`. ``up`` prints each host's progress in the cell, then attaches
this kernel as the cluster's driver (a thin driver, through the head's client server); ``down``
detaches it and stops the cluster on every host. The kernel remembers the cluster it brought
up, so ``%nbdist down`` needs no file for it; that cluster also ends with the kernel.
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError

import nbdist
import nbdist.cluster
from nbdist.exceptions import ClusterError

_brought_up: list[Any] = []  # the SSHCluster of this kernel's last `%nbdist up`, if any


def up(path: str) -> None:
    if nbdist.is_initialized():
        raise UsageError("%nbdist up: this kernel already has a cluster; run %nbdist stop "
                         "(or %nbdist down) first.")
    try:
        cluster = nbdist.cluster.up(path, hold=True)
    except (ClusterError, ValueError) as exc:
        raise UsageError(f"%nbdist up {path}: {exc}") from None
    if cluster.spec.ignored:
        print(f"not used by nbdist (ignored): {', '.join(cluster.spec.ignored)}")
    _brought_up[:] = [cluster]
    try:
        info = cluster.attach()
    except BaseException:
        cluster.down()
        _brought_up.clear()
        raise
    print(f"cluster {cluster.spec.name!r} is up: head at {cluster.address}, "
          f"{len(cluster.spec.hosts)} node(s); attached through node {info.get('node_id', '?')}."
          " %nbdist status shows it, %nbdist down stops it.")


def down(path: str | None) -> None:
    mine = _brought_up[0] if _brought_up else None
    try:
        if path is not None and (mine is None or nbdist.cluster.load(path).name != mine.spec.name):
            if nbdist.is_initialized():
                nbdist.shutdown()
            nbdist.cluster.down(path)
        elif mine is None:
            raise UsageError("%nbdist down: no cluster brought up by this kernel; name its "
                             "file: %nbdist down CLUSTER.yaml")
        else:
            mine.down()  # also ends the sessions that tie the cluster to this kernel
            _brought_up.clear()
    except (ClusterError, ValueError) as exc:
        raise UsageError(f"%nbdist down: {exc}") from None
    print("cluster is down: nothing of it runs on its hosts.")

"""nbdist on a Ray cluster: ``nbdist.init(backend="ray", address=...)`` (layer L3).

The same public API, magics, output routing and event stream, with Ray as the engine, for
users who outgrow nbdist's own (hundreds of nodes, autoscaling, Kubernetes). Ray is an optional
dependency (``pip install "nbdist[ray]"``); nothing here imports it until it is used.

    backend.py      RayBackend: the public API mapped onto Ray (driver and worker mode)
    startup.py      start(): start or attach to Ray, guard its processes, start the sink
    refs.py         ObjectRef / RayActorHandle: nbdist's ObjectRef and ActorHandle over Ray's
    worker.py       what runs in Ray's workers: task wrapper, actor host, captured output
    sink.py         the driver's thread that workers send output and records to
    state.py        task states, placement and workers from Ray's task events (bounded polling)
    errors.py       Ray's exceptions as nbdist's
    generators.py   streaming and dynamic generators on Ray's own
    groups.py       placement groups on Ray's own
    guard.py        the Ray session's processes end with the driver

docs/scaling.md says when to switch, how to attach to a cluster and what the panel shows here.
"""

from __future__ import annotations

from nbdist.backends.ray.backend import INSTALL_HINT, RayBackend
from nbdist.backends.ray.startup import start

__all__ = ["INSTALL_HINT", "RayBackend", "start"]

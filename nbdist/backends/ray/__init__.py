"""nbdist on a Ray cluster: ``nbdist.init(backend="ray", address=...)`` (layer L3).

The same public API, magics, output routing and event stream, with Ray as the engine, for
users who outgrow nbdist's own (hundreds of nodes, autoscaling, Kubernetes). Ray is an optional
dependency (``pip install "nbdist[ray]"``); nothing here imports it until it is used.

    backend.py   RayBackend: the public API mapped onto Ray (driver and worker mode), start()
    refs.py      ObjectRef / RayActorHandle: nbdist's ObjectRef and ActorHandle over Ray's
    worker.py    what runs in Ray's workers: task wrapper, actor host, captured output
    sink.py      the output sink actor and the driver's thread that pulls it
    state.py     task states, placement and workers from Ray's task events (bounded polling)
    errors.py    Ray's exceptions as nbdist's

docs/scaling.md says when to switch, how to attach to a cluster and what the panel shows here.
"""

from __future__ import annotations

from nbdist.backends.ray.backend import INSTALL_HINT, RayBackend, start

__all__ = ["INSTALL_HINT", "RayBackend", "start"]

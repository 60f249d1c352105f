"""``nbdist.util``: Ray's ``ray.util`` helpers, built only on nbdist's public API.

Everything here is plain library code over ``nbdist.remote``/``get``/``put``/``wait`` and actor
handles, so it runs unchanged on nbdist's own engine and on ``init(backend="ray")``:

    actor_pool.py        ActorPool: work spread over a fixed set of actors, results in order
                         or as they finish
    queue.py             Queue: a FIFO queue living in an async actor, shareable with tasks
    multiprocessing/     Pool: the stdlib ``multiprocessing.Pool`` API over pool actors
    check_serialize.py   inspect_serializability: what inside a value fails to pickle
    helpers.py           as_completed / map_unordered: results as they are ready, bounded
                         in-flight work
    node.py              get_node_ip_address

Subpackages (``queue``, ``multiprocessing``) are imported on use, as in Ray; other scheduler-side
modules (placement groups, scheduling strategies, collective, state, metrics) sit beside these
as their own modules and are listed in ``__all__`` by whoever adds them.
"""

from __future__ import annotations

from nbdist.util.actor_pool import ActorPool
from nbdist.util.check_serialize import inspect_serializability
from nbdist.util.helpers import as_completed, map_unordered
from nbdist.util.node import get_node_ip_address

__all__ = [
    "ActorPool",
    "as_completed",
    "get_node_ip_address",
    "inspect_serializability",
    "map_unordered",
]

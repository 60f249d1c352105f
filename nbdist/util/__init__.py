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
    list_named_actors    the live named actors (nbdist.driver.api's, asked of the cluster)
    placement_group.py   placement groups (also `nbdist.util.placement_group`, the function)
    scheduling_strategies.py  the `scheduling_strategy` option's values
    collective/          allreduce, allgather, reducescatter, broadcast, reduce, barrier,
                         send / recv among the actors of a group (Ray's ray.util.collective)

Subpackages (``queue``, ``multiprocessing``, ``collective``) are imported on use, as in Ray;
other scheduler-side modules (placement groups, scheduling strategies, collective, state,
metrics) sit beside these as their own modules and are listed in ``__all__`` by whoever adds
them.
"""

from __future__ import annotations

from typing import Any

from nbdist.driver.api import list_named_actors
from nbdist.util import scheduling_strategies
from nbdist.util.actor_pool import ActorPool
from nbdist.util.check_serialize import inspect_serializability
from nbdist.util.helpers import as_completed, map_unordered
from nbdist.util.node import get_node_ip_address

# As in Ray, ``nbdist.util.placement_group`` is the function (imported last, it replaces the
# module as the attribute); its module stays importable (``from nbdist.util.placement_group
# import PlacementGroup``).
from nbdist.util.placement_group import (  # noqa: I001
    get_current_placement_group,
    get_placement_group,
    placement_group,
    placement_group_table,
    remove_placement_group,
)

__all__ = [
    "ActorPool",
    "as_completed",
    "get_current_placement_group",
    "get_node_ip_address",
    "get_placement_group",
    "inspect_serializability",
    "list_named_actors",
    "map_unordered",
    "placement_group",
    "placement_group_table",
    "remove_placement_group",
    "scheduling_strategies",
]


def __getattr__(name: str) -> Any:
    # ``nbdist.util.state`` and ``nbdist.util.metrics`` load on first use (no import cycle
    # with ``nbdist``, and nothing to pay in processes that never use them).
    if name in ("metrics", "state"):
        import importlib

        return importlib.import_module(f"nbdist.util.{name}")
    raise AttributeError(f"module 'nbdist.util' has no attribute {name!r}")

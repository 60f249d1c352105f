"""Scheduling strategies: where a task or actor runs, as the resources it asks for
(layer L3; the public names are in `nbdist.util.scheduling_strategies`).

Work in a placement group asks for the group's resources instead of the plain ones
(`group_shape`), so the nodes' queues, forwarding and feasibility checks place it without
knowing about groups:

    {"CPU": 1}  in group G, bundle 0  ->  {"CPU_group_G": 1, "CPU_group_0_G": 1,
                                           "bundle_group_G": 0.001, "bundle_group_0_G": 0.001}

The task's spec carries ``extra["pg"] = (G, capture, index)`` so that its worker knows its group
(``get_current_placement_group``) and, with ``placement_group_capture_child_tasks``, puts the
work it submits with the default strategy in the same group. Node affinity asks for a sliver
of the node's own ``node:<id>`` resource (`nbdist.wire.protocol.NODE_PIN`): work pinned
to a node that is not in the cluster fails at once. Soft affinity and "SPREAD" (the next alive
node in turn, from a list refreshed every second) ask for a smaller sliver, SOFT_NODE_PIN,
which a node drops from a task when the node it names is gone; a soft actor is checked against
the alive nodes when it is created.

On Ray the backend hands Ray its own strategy objects (`to_ray_strategy`).
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from nbdist.backends.base import current
from nbdist.wire.protocol import NODE_PIN, SOFT_NODE_PIN

BUNDLE_DEMAND = 0.001
NODES_TTL_S = 1.0


class PlacementGroupSchedulingStrategy:
    """Run in ``placement_group`` (bundle ``placement_group_bundle_index``, -1: any); with
    ``placement_group_capture_child_tasks``, the work it submits runs in the group too."""

    def __init__(self, placement_group: Any,
                 placement_group_bundle_index: int = -1,
                 placement_group_capture_child_tasks: bool | None = None) -> None:
        self.placement_group = placement_group
        self.placement_group_bundle_index = placement_group_bundle_index
        self.placement_group_capture_child_tasks = placement_group_capture_child_tasks

    def _key(self) -> tuple:
        return (self.placement_group, self.placement_group_bundle_index,
                self.placement_group_capture_child_tasks)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlacementGroupSchedulingStrategy) and other._key() == self._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"PlacementGroupSchedulingStrategy({self.placement_group!r}, "
                f"{self.placement_group_bundle_index}, "
                f"{self.placement_group_capture_child_tasks})")


class NodeAffinitySchedulingStrategy:
    """Run on node ``node_id``; with ``soft``, anywhere if that node is not alive."""

    def __init__(self, node_id: str, soft: bool, _spill_on_unavailable: bool = False,
                 _fail_on_unavailable: bool = False) -> None:
        self.node_id = node_id
        self.soft = soft
        self._spill_on_unavailable = _spill_on_unavailable
        self._fail_on_unavailable = _fail_on_unavailable

    def _key(self) -> tuple:
        return (self.node_id, self.soft, self._spill_on_unavailable, self._fail_on_unavailable)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NodeAffinitySchedulingStrategy) and other._key() == self._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"NodeAffinitySchedulingStrategy({self.node_id!r}, soft={self.soft})"


def check_placement_group_index(placement_group: Any, bundle_index: int) -> None:
    if placement_group is None:
        if bundle_index != -1:
            raise ValueError("If placement group is not set, the value of bundle index must be "
                             "-1.")
    elif bundle_index >= placement_group.bundle_count or bundle_index < -1:
        raise ValueError(f"placement group bundle index {bundle_index} is invalid. Valid "
                         f"placement group indexes: 0-{placement_group.bundle_count}")


# ---------------------------------------------------------------------------- shapes
def strategy_of(opts: dict[str, Any]) -> Any:
    """The scheduling strategy ``opts`` ask for (Ray's older ``placement_group=`` options
    become a PlacementGroupSchedulingStrategy); None for the default."""
    strategy = opts.get("scheduling_strategy")
    pg = opts.get("placement_group", "default")
    if pg != "default" and pg is not None:
        if strategy is not None and strategy != "DEFAULT":
            raise ValueError("Placement groups should be specified via the "
                             "scheduling_strategy option; do not pass placement_group= too.")
        strategy = PlacementGroupSchedulingStrategy(
            pg, opts.get("placement_group_bundle_index", -1),
            opts.get("placement_group_capture_child_tasks"))
    if strategy is None or strategy == "DEFAULT":
        return None
    if strategy == "SPREAD" or isinstance(strategy, (PlacementGroupSchedulingStrategy,
                                                     NodeAffinitySchedulingStrategy)):
        if isinstance(strategy, PlacementGroupSchedulingStrategy) and \
                strategy.placement_group is not None:
            check_placement_group_index(strategy.placement_group,
                                        strategy.placement_group_bundle_index)
        return strategy
    raise ValueError(f"Invalid scheduling_strategy {strategy!r}: use 'DEFAULT', 'SPREAD', a "
                     "PlacementGroupSchedulingStrategy or a NodeAffinitySchedulingStrategy "
                     "(nbdist.util.scheduling_strategies).")


def group_shape(shape: tuple[tuple[str, float], ...], pg: str,
                index: int) -> tuple[tuple[str, float], ...]:
    out: dict[str, float] = {}
    for name, amount in shape:
        out[f"{name}_group_{pg}"] = amount
        if index >= 0:
            out[f"{name}_group_{index}_{pg}"] = amount
    out[f"bundle_group_{pg}"] = BUNDLE_DEMAND
    if index >= 0:
        out[f"bundle_group_{index}_{pg}"] = BUNDLE_DEMAND
    return tuple(sorted(out.items()))


def _check_fits(shape: tuple[tuple[str, float], ...], group: Any, index: int,
                what: str) -> None:
    bundles = group._bundles
    if not bundles:
        return
    candidates = bundles if index < 0 else [bundles[index]]
    if not any(all(b.get(n, 0.0) >= a - 1e-9 for n, a in shape) for b in candidates):
        raise ValueError(
            f"Cannot schedule {what} with the placement group because the resource request "
            f"{dict(shape)} cannot fit into any bundles for the placement group, {bundles}.")


def placed(shape: tuple[tuple[str, float], ...], strategy: Any, group: Any, what: str,
           actor: bool = False,
           ) -> tuple[tuple[tuple[str, float], ...] | None, dict[str, Any] | None]:
    """(the resources to ask for, the spec's extra fields) of work (a task, or an ``actor``)
    with ``strategy``, submitted from work running in ``group`` ((pg, capture, index) or
    None)."""
    if strategy is None:
        if group is None or not group[1]:
            return shape or None, None
        return group_shape(shape, group[0], -1), {"pg": (group[0], True, -1)}
    if isinstance(strategy, PlacementGroupSchedulingStrategy):
        pg = strategy.placement_group
        if pg is None:
            return shape or None, None
        index = strategy.placement_group_bundle_index
        _check_fits(shape, pg, index, what)
        capture = bool(strategy.placement_group_capture_child_tasks)
        return group_shape(shape, pg.id.hex(), index), {"pg": (pg.id.hex(), capture, index)}
    if strategy == "SPREAD":
        node, pin = _spread_node(), SOFT_NODE_PIN
    else:
        node, pin = strategy.node_id, SOFT_NODE_PIN if strategy.soft else NODE_PIN
        if strategy.soft and actor and node not in _alive_nodes(fresh=True):
            return shape or None, None  # (a task's soft pin is dropped by the node itself)
    if node is None:
        return shape or None, None
    return tuple(sorted((*shape, (f"node:{node}", pin)))), None


_NODES: list[Any] = [0.0, [], itertools.count()]


def _alive_nodes(fresh: bool = False) -> list[str]:
    if fresh or time.monotonic() - _NODES[0] > NODES_TTL_S:
        _NODES[1] = sorted(n["NodeID"] for n in current.backend.nodes() if n.get("Alive", True))
        _NODES[0] = time.monotonic()
    return _NODES[1]


def _spread_node() -> str | None:
    nodes = _alive_nodes()
    return nodes[next(_NODES[2]) % len(nodes)] if nodes else None


# ---------------------------------------------------------------------------- Ray
def to_ray_strategy(strategy: Any) -> Any:
    """Ray's own strategy object for one of ours (the Ray backend's options)."""
    from ray.util import scheduling_strategies as rs

    if isinstance(strategy, PlacementGroupSchedulingStrategy):
        pg = strategy.placement_group
        ray_group: Any = None if pg is None else pg._ray
        return rs.PlacementGroupSchedulingStrategy(
            ray_group, strategy.placement_group_bundle_index,
            strategy.placement_group_capture_child_tasks)
    if isinstance(strategy, NodeAffinitySchedulingStrategy):
        return rs.NodeAffinitySchedulingStrategy(
            strategy.node_id, strategy.soft, _spill_on_unavailable=strategy._spill_on_unavailable,
            _fail_on_unavailable=strategy._fail_on_unavailable)
    return strategy

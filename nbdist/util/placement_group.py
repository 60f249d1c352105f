"""``nbdist.util.placement_group``: Ray's ``ray.util.placement_group`` module.

Bundles of resources reserved atomically across the cluster, with strategies PACK, SPREAD,
STRICT_PACK and STRICT_SPREAD; work runs in a group with
``scheduling_strategy=PlacementGroupSchedulingStrategy(pg, ...)``. As in Ray,
``nbdist.util.placement_group`` is also the function itself. How groups are placed (and what
happens when a node under one is lost) is described in `nbdist.driver.groups`.
"""

from __future__ import annotations

from nbdist.driver.groups import (
    PlacementGroup,
    get_current_placement_group,
    get_placement_group,
    placement_group,
    placement_group_table,
    remove_placement_group,
)
from nbdist.driver.strategies import check_placement_group_index

__all__ = [
    "PlacementGroup",
    "check_placement_group_index",
    "get_current_placement_group",
    "get_placement_group",
    "placement_group",
    "placement_group_table",
    "remove_placement_group",
]

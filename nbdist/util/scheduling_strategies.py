"""``nbdist.util.scheduling_strategies``: Ray's scheduling strategies, for the
``scheduling_strategy`` option of tasks and actors.

``"DEFAULT"`` (where resources are free, the submitting node first), ``"SPREAD"`` (across the
alive nodes in turn), `NodeAffinitySchedulingStrategy` (a given node; ``soft=True``: anywhere if
it is not alive) and `PlacementGroupSchedulingStrategy` (in a placement group's bundles).
"""

from __future__ import annotations

from nbdist.driver.strategies import (
    NodeAffinitySchedulingStrategy,
    PlacementGroupSchedulingStrategy,
)

DEFAULT_SCHEDULING_STRATEGY = "DEFAULT"
SPREAD_SCHEDULING_STRATEGY = "SPREAD"

__all__ = [
    "DEFAULT_SCHEDULING_STRATEGY",
    "NodeAffinitySchedulingStrategy",
    "PlacementGroupSchedulingStrategy",
    "SPREAD_SCHEDULING_STRATEGY",
]

"""The trial actors of one search: creating, reusing and killing them, and the resource ledger.

Owned by the controller's thread. The ledger counts what every live trial actor holds (running
or idle, kept for reuse) against the cluster's resources read when the search starts, so the
controller starts a trial only when its actor can be placed now rather than queueing it inside
the cluster, where it could not be cancelled cheaply. Idle actors are killed when a trial of
another shape needs their room, and all of them when the search ends.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import nbdist
from nbdist.tune.error import TuneError
from nbdist.tune.execution.trial_actor import TrialActor

logger = logging.getLogger(__name__)
_EPS = 1e-9


@dataclass(eq=False)
class ActorSlot:
    handle: Any
    resources: dict[str, float]  # what it holds in the ledger (all bundles with a group)
    key: tuple
    group: Any = None  # its placement group, when the trial asked for several bundles


class ActorManager:
    def __init__(self, trainable: Any, reuse: bool) -> None:
        self.trainable = trainable
        self.reuse = reuse
        self.actor_class = nbdist.remote(TrialActor)
        self.total = {k: float(v) for k, v in nbdist.cluster_resources().items()}
        self.used: dict[str, float] = {}
        self.idle: list[ActorSlot] = []
        self.live: set[ActorSlot] = set()

    def check_possible(self, resources: dict[str, float]) -> str | None:
        """Why ``resources`` can never be placed on this cluster, or None."""
        for key, need in resources.items():
            if need > self.total.get(key, 0.0) + _EPS:
                return (f"the trial asks for {need:g} {key} but the cluster has "
                        f"{self.total.get(key, 0.0):g}; lower its resources "
                        "(tune.with_resources) or start nbdist with more")
        return None

    def fits(self, resources: dict[str, float], key: tuple) -> bool:
        if any(slot.key == key for slot in self.idle):
            return True
        if self._fits(resources):
            return True
        while self.idle and not self._fits(resources):
            self.kill(self.idle.pop(0))
        return self._fits(resources)

    def _fits(self, resources: dict[str, float]) -> bool:
        return all(self.used.get(k, 0.0) + v <= self.total.get(k, 0.0) + _EPS
                   for k, v in resources.items() if v > 0)

    def acquire(self, resources: dict[str, float], bundles: list[dict[str, float]] | None,
                strategy: str) -> tuple[ActorSlot, bool]:
        """An actor for a trial of this shape, and whether it is a reused one."""
        key = actor_key(resources, bundles, strategy)
        for i, slot in enumerate(self.idle):
            if slot.key == key:
                del self.idle[i]
                return slot, True
        if bundles:
            slot = self._in_group(resources, bundles, strategy, key)
        else:
            slot = ActorSlot(self.actor_class.options(**_options(resources)).remote(
                self.trainable), dict(resources), key)
        for k, v in slot.resources.items():
            self.used[k] = self.used.get(k, 0.0) + v
        self.live.add(slot)
        return slot, False

    def _in_group(self, resources: dict[str, float], bundles: list[dict[str, float]],
                  strategy: str, key: tuple) -> ActorSlot:
        try:
            from nbdist.util.placement_group import placement_group
            from nbdist.util.scheduling_strategies import PlacementGroupSchedulingStrategy
        except ImportError as exc:
            raise TuneError("a trial of several bundles needs placement groups "
                            "(nbdist.util.placement_group), which this nbdist lacks") from exc
        group = placement_group([_ray_names(b) for b in bundles], strategy=strategy)
        options = _options(resources)
        options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
            placement_group=group, placement_group_bundle_index=0)
        handle = self.actor_class.options(**options).remote(self.trainable)
        total: dict[str, float] = {}
        for bundle in bundles:
            for k, v in bundle.items():
                total[k] = total.get(k, 0.0) + v
        return ActorSlot(handle, total, key, group)

    def release(self, slot: ActorSlot, reusable: bool) -> None:
        if self.reuse and reusable and slot.group is None:
            self.idle.append(slot)
        else:
            self.kill(slot)

    def kill(self, slot: ActorSlot) -> None:
        if slot not in self.live:
            return
        self.live.discard(slot)
        for k, v in slot.resources.items():
            self.used[k] = self.used.get(k, 0.0) - v
        try:
            nbdist.kill(slot.handle)
        except Exception:  # already gone with its process
            logger.debug("trial actor already dead", exc_info=True)
        if slot.group is not None:
            from nbdist.util.placement_group import remove_placement_group

            remove_placement_group(slot.group)

    def shutdown(self) -> None:
        for slot in list(self.live):
            self.kill(slot)
        self.idle.clear()


def actor_key(resources: dict[str, float], bundles: list[dict[str, float]] | None,
         strategy: str) -> tuple:
    return (tuple(sorted(resources.items())),
            tuple(tuple(sorted(b.items())) for b in bundles or ()), strategy)


def _ray_names(bundle: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in bundle.items() if v > 0}


def _options(resources: dict[str, float]) -> dict[str, Any]:
    custom = {k: v for k, v in resources.items() if k not in ("CPU", "GPU") and v > 0}
    options: dict[str, Any] = {"num_cpus": resources.get("CPU", 1.0),
                               "num_gpus": resources.get("GPU", 0.0),
                               "max_concurrency": 2}
    if custom:
        options["resources"] = custom
    return options

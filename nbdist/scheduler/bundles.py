"""Bundles: this node's share of placement groups (layer L1, no I/O).

A placement group is a list of bundles (resource dicts) that the head places on nodes all at
once, in two phases (see `nbdist.daemons.groups`). On one node a bundle goes through::

    prepare   its resources are taken from ``avail`` (GPU ids from ``free_gpus``) and held
              for the group; nothing can use them yet. Fails (False) if they are not free.
    commit    the group's own resources appear, under Ray's names:
                  <R>_group_<pg>       the sum over the group's bundles on this node
                  <R>_group_<i>_<pg>   bundle i
                  bundle_group_<pg>, bundle_group_<i>_<pg>   1000 per bundle, so that work
                                                             asking for no resources is pinned
              work scheduled in the group asks for these names instead of <R>
              (`nbdist.driver.groups.group_shape`), so the queues, forwarding and the head's
              view need nothing new.
    cancel    a prepared, uncommitted attempt gives its resources back
    remove    the group's names vanish and what it reserved goes back to ``avail``; the node
              state kills the work that held them.

GPU ids reserved by a group live in ``Placement.group_gpus`` under ``GPU_group_<pg>`` until a
task of the group takes them. ``removed`` remembers why recent groups ended, so work that still
waits for one fails with that reason instead of waiting forever.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nbdist.scheduler.records import Shape

if TYPE_CHECKING:
    from nbdist.scheduler.placement import Placement

BUNDLE_UNIT = 1000.0
REMEMBER_REMOVED = 10_000
_MARK = "_group_"


def group_of(shape: Shape) -> str | None:
    """The placement group whose resources ``shape`` asks for, or None."""
    for name, _ in shape:
        if _MARK in name:
            return name.rsplit("_", 1)[-1]
    return None


def group_of_name(name: str) -> str | None:
    return name.rsplit("_", 1)[-1] if _MARK in name else None


def bundle_names(pg: str, index: int, resources: dict[str, float]) -> dict[str, float]:
    """The resources one committed bundle adds to its node."""
    out: dict[str, float] = {}
    for name, amount in resources.items():
        if amount:
            out[f"{name}_group_{pg}"] = amount
            out[f"{name}_group_{index}_{pg}"] = amount
    out[f"bundle_group_{pg}"] = BUNDLE_UNIT
    out[f"bundle_group_{index}_{pg}"] = BUNDLE_UNIT
    return out


class Bundles:
    def __init__(self, placement: Placement) -> None:
        self.placement = placement
        # (pg, attempt) -> [(bundle index, resources, gpu ids)] held but not committed
        self.prepared: dict[tuple[str, int], list[tuple[int, dict[str, float], list[int]]]] = {}
        # pg -> [(bundle index, resources)] committed here
        self.committed: dict[str, list[tuple[int, dict[str, float]]]] = {}
        self.removed = placement.ended_groups

    def prepare(self, pg: str, attempt: int, bundles: list[tuple[int, dict[str, float]]]) -> bool:
        placement = self.placement
        need: dict[str, float] = {}
        for _, res in bundles:
            for name, amount in res.items():
                need[name] = need.get(name, 0.0) + amount
        shape = tuple(sorted(need.items()))
        if pg in self.removed or not placement.fits(shape) or (
                len(placement.free_gpus) < int(need.get("GPU", 0.0) + 0.999)):
            return False
        held = []
        for index, res in bundles:
            gpus = placement.acquire(tuple(res.items()))
            held.append((index, dict(res), gpus))
        self.prepared[(pg, attempt)] = held
        return True

    def commit(self, pg: str, attempt: int) -> bool:
        held = self.prepared.pop((pg, attempt), None)
        if held is None:
            return False
        placement = self.placement
        total, avail = placement.total, placement.avail
        for index, res, gpus in held:
            for name, amount in bundle_names(pg, index, res).items():
                total[name] = total.get(name, 0.0) + amount
                avail[name] = avail.get(name, 0.0) + amount
            if gpus:
                placement.group_gpus.setdefault(f"GPU_group_{pg}", []).extend(gpus)
            self.committed.setdefault(pg, []).append((index, res))
        placement.io.resources_changed()
        placement.need_dispatch = True
        return True

    def cancel(self, pg: str, attempt: int) -> None:
        for _, res, gpus in self.prepared.pop((pg, attempt), []):
            self.placement.release(tuple(res.items()), gpus)

    def remove(self, pg: str, reason: str) -> bool:
        """Forget group ``pg`` here; True if it held anything on this node."""
        self.removed[pg] = reason
        while len(self.removed) > REMEMBER_REMOVED:
            self.removed.popitem(last=False)
        held = False
        for key in [k for k in self.prepared if k[0] == pg]:
            self.cancel(*key)
            held = True
        bundles = self.committed.pop(pg, None)
        if bundles is None:
            return held
        placement = self.placement
        total, avail = placement.total, placement.avail
        for index, res in bundles:
            for name in bundle_names(pg, index, res):
                total.pop(name, None)
                avail.pop(name, None)
        gpus = placement.group_gpus.pop(f"GPU_group_{pg}", [])
        for _, res in bundles:
            # The base resources come back; GPU ids still used by a task come back to
            # ``free_gpus`` when it ends (its group's pool is gone).
            take = min(len(gpus), int(res.get("GPU", 0.0) + 0.999))
            placement.release(tuple(res.items()), gpus[:take])
            gpus = gpus[take:]
        return True

    def why_not(self, shape: Shape) -> str | None:
        """Why work asking for ``shape`` can never run, if its group ended."""
        pg = group_of(shape)
        return None if pg is None else self.removed.get(pg)

"""Placement groups on Ray: `nbdist.util.placement_group`'s calls made with Ray's own
(``ray.util.placement_group``); each nbdist `PlacementGroup` holds the Ray group it stands for,
which the Ray backend hands to Ray in its scheduling strategies."""

from __future__ import annotations

from typing import Any

from nbdist.driver.groups import PlacementGroup


def _wrap(ray_group: Any) -> PlacementGroup:
    return PlacementGroup(ray_group.id.hex(), [dict(b) for b in ray_group.bundle_specs],
                          ray_group)


class RayGroups:
    def create(self, bundles: list[dict[str, float]], strategy: str, name: str,
               lifetime: str | None) -> PlacementGroup:
        from ray.util import placement_group

        return _wrap(placement_group(bundles, strategy=strategy, name=name, lifetime=lifetime))

    def remove(self, group: PlacementGroup) -> None:
        from ray.util import remove_placement_group

        remove_placement_group(group._ray)

    def named(self, name: str) -> PlacementGroup | None:
        from ray.util import get_placement_group

        try:
            return _wrap(get_placement_group(name))
        except ValueError:
            return None

    def table(self, group: PlacementGroup | None) -> dict:
        from ray.util import placement_group_table

        return dict(placement_group_table(None if group is None else group._ray))

    def current(self) -> PlacementGroup | None:
        from ray.util import get_current_placement_group

        ray_group = get_current_placement_group()
        return None if ray_group is None else _wrap(ray_group)

    def gpu_ids(self) -> list[Any]:
        import ray

        return list(ray.get_gpu_ids())

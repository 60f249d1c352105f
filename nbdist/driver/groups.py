"""Placement groups, caller side (layer L3; the public names are in
`nbdist.util.placement_group`, Ray's module of the same name).

On nbdist's engine a group is a row at the head (`nbdist.daemons.groups`, which places its
bundles on nodes in two phases) and, once placed, resources on the nodes holding its bundles
(`nbdist.scheduler.bundles`); work runs in it through its scheduling strategy
(`nbdist.driver.strategies`). On Ray (``init(backend="ray")``) the backend's ``group_ops``
makes Ray's own groups, and each `PlacementGroup` holds the Ray group it stands for.
"""

from __future__ import annotations

import os
from typing import Any

from nbdist.backends.base import current
from nbdist.driver.remote_function import RemoteFunction
from nbdist.driver.strategies import PlacementGroupSchedulingStrategy


class PlacementGroupID:
    __slots__ = ("_hex",)

    def __init__(self, hex_id: str) -> None:
        self._hex = hex_id

    def hex(self) -> str:
        return self._hex

    def binary(self) -> bytes:
        return bytes.fromhex(self._hex)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlacementGroupID) and other._hex == self._hex

    def __hash__(self) -> int:
        return hash(self._hex)

    def __repr__(self) -> str:
        return f"PlacementGroupID({self._hex})"


class PlacementGroup:
    """A handle to a placement group (Ray's ``PlacementGroup``); picklable, so it can be
    passed to tasks and actors."""

    def __init__(self, id_hex: str, bundles: list[dict[str, float]] | None = None,
                 ray_group: Any = None) -> None:
        self.id = PlacementGroupID(id_hex)
        self._bundles = bundles
        self._ray = ray_group

    @property
    def bundle_specs(self) -> list[dict[str, float]]:
        if self._bundles is None:
            row = placement_group_table(self) or {}
            self._bundles = [dict(b) for _, b in sorted(row.get("bundles", {}).items())]
        return self._bundles

    @property
    def bundle_count(self) -> int:
        return len(self.bundle_specs)

    @property
    def is_empty(self) -> bool:
        return not self.bundle_specs

    def ready(self) -> Any:
        """An ObjectRef ready (its value: this group) once every bundle is reserved; ``get``
        raises TaskPlacementGroupRemoved if the group is removed (or can never be placed)."""
        check = _RESERVATION_CHECK.options(
            scheduling_strategy=PlacementGroupSchedulingStrategy(self))
        return check.remote(self)  # (through remote(): it carries the check's library mark)

    def wait(self, timeout_seconds: float = 30) -> bool:
        """Whether every bundle is reserved within ``timeout_seconds``."""
        ref = self.ready()
        ready, _ = current.backend.wait([ref], 1, timeout_seconds, True)
        if not ready:
            return False
        try:
            current.backend.get([ref], None)
        except Exception:
            return False
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlacementGroup) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"PlacementGroup(id={self.id.hex()})"

    def __reduce__(self) -> Any:
        return (PlacementGroup, (self.id.hex(), self._bundles, self._ray))


def bundle_reservation_check(pg: PlacementGroup) -> PlacementGroup:
    """Runs in the group once it is placed: what ``ready()`` waits for (Ray's way)."""
    return pg


_RESERVATION_CHECK = RemoteFunction(bundle_reservation_check,
                                    {"num_cpus": 0, "library_call": "placement_group"})


# ---------------------------------------------------------------------------- the API
def placement_group(bundles: list[dict[str, float]], strategy: str = "PACK", name: str = "",
                    lifetime: str | None = None, _max_cpu_fraction_per_node: float = 1.0,
                    _soft_target_node_id: str | None = None,
                    bundle_label_selector: Any = None) -> PlacementGroup:
    """Reserve ``bundles`` (resource dicts) atomically across the cluster (Ray's
    ``placement_group``); returns at once, ``pg.ready()`` / ``pg.wait()`` tell when placed."""
    if not isinstance(bundles, list) or not bundles:
        raise ValueError("The placement group `bundles` argument cannot contain an empty list: "
                         "pass a list of resource dicts, e.g. [{'CPU': 1}].")
    if lifetime not in (None, "detached"):
        raise ValueError("Placement group `lifetime` argument must be either `None` or "
                         f"'detached'. Got {lifetime!r}.")
    return _ops().create([dict(b) for b in bundles], strategy, name or "", lifetime)


def remove_placement_group(placement_group: PlacementGroup) -> None:
    """Remove the group: its resources are freed and the work running in it is killed."""
    _ops().remove(placement_group)


def get_placement_group(placement_group_name: str) -> PlacementGroup:
    group = _ops().named(placement_group_name)
    if group is None:
        raise ValueError(f"Failed to look up placement group with name: "
                         f"{placement_group_name}")
    return group


def placement_group_table(placement_group: PlacementGroup | None = None) -> dict:
    return _ops().table(placement_group)


def get_current_placement_group() -> PlacementGroup | None:
    """The group the calling task or actor runs in, or None (and None in a driver)."""
    return _ops().current()


def get_gpu_ids() -> list[int]:
    """The GPU ids given to the calling task or actor (its CUDA_VISIBLE_DEVICES); [] in a
    driver or in work that asked for no GPUs."""
    ops = getattr(current.backend, "group_ops", None)
    if ops is not None:
        return list(ops.gpu_ids())
    client = current.client
    return [] if client is None else list(client.gpu_ids)


def _ops() -> Any:
    ops = getattr(current.backend, "group_ops", None)
    return ops if ops is not None else ENGINE


class EngineGroups:
    """The API on nbdist's engine: requests to the head through the caller's node."""

    def create(self, bundles: list[dict[str, float]], strategy: str, name: str,
               lifetime: str | None) -> PlacementGroup:
        from nbdist.driver import runtime

        client = runtime.current()
        # A driver knows its namespace; the head finds a task's from its job.
        namespace = (getattr(current.backend, "namespace", "") or "") if (
            client.mode == "driver") else None
        pg = os.urandom(12).hex()
        client.control("group_create", {
            "id": pg, "bundles": bundles, "strategy": strategy, "name": name,
            "namespace": namespace, "lifetime": lifetime, "job": client.job or client.ctx.job})
        return PlacementGroup(pg, bundles)

    def remove(self, group: PlacementGroup) -> None:
        from nbdist.driver import runtime

        runtime.current().control("group_remove", group.id.hex())

    def named(self, name: str) -> PlacementGroup | None:
        from nbdist.driver import runtime

        client = runtime.current()
        namespace = (getattr(current.backend, "namespace", "") or "") if (
            client.mode == "driver") else None
        row = client.control("group_named", (name, namespace, client.job or client.ctx.job))
        if row is None:
            return None
        return PlacementGroup(row["placement_group_id"],
                              [dict(b) for _, b in sorted(row["bundles"].items())])

    def table(self, group: PlacementGroup | None) -> dict:
        from nbdist.driver import runtime

        rows = runtime.current().control("group_table",
                                         None if group is None else group.id.hex())
        return rows or {}

    def current(self) -> PlacementGroup | None:
        client = current.client
        group = None if client is None else getattr(client.ctx, "group", None)
        return None if group is None else PlacementGroup(group[0])


ENGINE = EngineGroups()

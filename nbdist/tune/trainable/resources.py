"""What a trial asks for: ``with_resources``, ``PlacementGroupFactory`` and their normal form.

A trial's request is normalised to a dict with Ray's resource names (``CPU``, ``GPU``, custom
names as given); a request of several bundles becomes a placement group per trial, the trial's
actor in its first bundle. Requests are read once per trial, in the driver.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

_ATTR = "_nbdist_tune_resources"


class PlacementGroupFactory:
    """Bundles of resources for one trial, as Ray Tune's: ``PlacementGroupFactory([{"CPU": 1},
    {"CPU": 2}], strategy="PACK")``; the trial runs in the first bundle, the rest are for the
    work it starts itself."""

    def __init__(self, bundles: Sequence[Mapping[str, float]], strategy: str = "PACK") -> None:
        if not bundles:
            raise ValueError("a PlacementGroupFactory needs at least one bundle")
        self.bundles = [normalize(b) for b in bundles]
        self.strategy = strategy

    @property
    def required_resources(self) -> dict[str, float]:
        total: dict[str, float] = {}
        for bundle in self.bundles:
            for key, value in bundle.items():
                total[key] = total.get(key, 0.0) + value
        return total

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, PlacementGroupFactory) and other.bundles == self.bundles
                and other.strategy == self.strategy)

    def __hash__(self) -> int:
        return hash((repr(self.bundles), self.strategy))

    def __repr__(self) -> str:
        return f"PlacementGroupFactory({self.bundles}, strategy={self.strategy!r})"


def normalize(resources: Mapping[str, Any]) -> dict[str, float]:
    """``{"cpu": 1, "gpu": 0, "memory": ...}`` (any case, the seed's form) → Ray's names."""
    out: dict[str, float] = {}
    for key, value in resources.items():
        name = key.upper() if key.lower() in ("cpu", "gpu") else key
        if value is None:
            continue
        if float(value) < 0:
            raise ValueError(f"resource {key!r} must not be negative, got {value!r}")
        out[name] = float(value)
    out.setdefault("CPU", 1.0)
    return out


def with_resources(trainable: Any, resources: Any) -> Any:
    """The trainable, asking for ``resources`` per trial: a dict (``{"cpu": 2, "gpu": 0.5}``),
    a ``PlacementGroupFactory``, or a function of the trial's config returning either."""
    if isinstance(trainable, type):
        wrapped: Any = type(trainable.__name__, (trainable,), {_ATTR: staticmethod(
            lambda: resources)})
        wrapped.__module__ = trainable.__module__
        wrapped.__qualname__ = trainable.__qualname__
        return wrapped

    @functools.wraps(trainable)
    def run(*args: Any, **kwargs: Any) -> Any:
        return trainable(*args, **kwargs)

    setattr(run, _ATTR, lambda: resources)
    return run


def resources_of(trainable: Any, config: dict[str, Any],
                 default: Any = None) -> tuple[dict[str, float], list[dict[str, float]] | None,
                                               str]:
    """(the actor's resources, the bundles when the trial needs a placement group, strategy)."""
    getter = getattr(trainable, _ATTR, None)
    request = getter() if getter is not None else default
    if request is None and hasattr(trainable, "default_resource_request"):
        request = trainable.default_resource_request(config)
    if callable(request) and not isinstance(request, PlacementGroupFactory):
        request = request(config)
    if request is None:
        return {"CPU": 1.0}, None, "PACK"
    if isinstance(request, PlacementGroupFactory):
        if len(request.bundles) == 1:
            return dict(request.bundles[0]), None, request.strategy
        return dict(request.bundles[0]), [dict(b) for b in request.bundles], request.strategy
    if isinstance(request, Mapping):
        return normalize(request), None, "PACK"
    raise TypeError(f"a trial's resources must be a dict or a PlacementGroupFactory, got "
                    f"{type(request).__name__}")

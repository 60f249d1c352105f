"""Turning a spec with unresolved values into concrete variants.

A spec is a nested dict (and lists) whose leaves are constants, ``Domain``s (``uniform(...)``,
``sample_from(...)``) or grid axes (``{"grid_search": [...]}``). A value is addressed by its
path, a tuple of keys and list indices. Variants come out in Ray Tune's order: grid axes sorted
by path and crossed with the first axis varying fastest; for each grid point every domain is
sampled afresh (or, with ``constant_grid_search``, once for the whole grid).

``sample_from`` functions receive the spec under an access guard: ``spec.config.x`` (or
``spec["config"]["x"]``) returns ``x`` once it is resolved and raises
``RecursiveDependencyError`` while it is not, so functions that read other values are retried
in later passes until everything they read is resolved. A value that resolves to a new domain
or grid (a function returning ``grid_search(...)``) is resolved in turn.

``format_vars`` renders the resolved values as Ray's experiment tag (``lr=0.0100,momentum=0.9``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

from nbdist.tune.search.sample import Categorical, Domain, RandomState

Path = tuple[Any, ...]

_MAX_RESOLUTION_PASSES = 20


class RecursiveDependencyError(Exception):
    """A ``sample_from`` function read a value that is not resolved yet."""


def generate_variants(unresolved_spec: dict[str, Any], constant_grid_search: bool = False,
                      random_state: RandomState = None
                      ) -> Iterator[tuple[dict[Path, Any], dict[str, Any]]]:
    """Yield ``(resolved_vars, spec)`` per variant: the values chosen by path, and the spec."""
    yield from _variants(unresolved_spec, constant_grid_search, random_state)


def parse_spec_vars(spec: dict[str, Any]
                    ) -> tuple[list[tuple[Path, Any]], list[tuple[Path, Domain]],
                               list[tuple[Path, Categorical]]]:
    """Split a spec into its constants, its sampled domains and its grid axes (sorted)."""
    resolved: dict[Path, Any] = {}
    unresolved: dict[Path, Domain] = {}
    _split(spec, (), resolved, unresolved)
    domain_vars = [(p, d) for p, d in unresolved.items() if not d.is_grid()]
    grid_vars = [(p, d) for p, d in unresolved.items() if d.is_grid()]
    grid_vars.sort(key=lambda item: _sort_key(item[0]))
    return list(resolved.items()), domain_vars, grid_vars  # type: ignore[return-value]


def count_spec_samples(spec: dict[str, Any], num_samples: int = 1) -> int:
    """How many variants ``num_samples`` passes over ``spec``'s grid make."""
    _, _, grid_vars = parse_spec_vars(spec)
    count = num_samples
    for _, domain in grid_vars:
        count *= len(domain.categories)
    return count


def has_unresolved_values(spec: dict[str, Any]) -> bool:
    _, domain_vars, grid_vars = parse_spec_vars(spec)
    return bool(domain_vars or grid_vars)


def format_vars(resolved_vars: dict[Path, Any]) -> str:
    """Ray's experiment tag: ``last_key=value`` pairs sorted by path, safe in directory names."""
    return ",".join(
        f"{_clean_value(path[-1])}={_clean_value(value)}"
        for path, value in sorted(resolved_vars.items(), key=lambda kv: _sort_key(kv[0])))


def flatten_dict(nested: dict[Any, Any]) -> dict[Path, Any]:
    """``{"a": {"b": 1}}`` -> ``{("a", "b"): 1}``: every leaf of nested dicts by its path."""
    flat: dict[Path, Any] = {}
    for key, value in nested.items():
        if isinstance(value, dict) and value:
            for sub, leaf in flatten_dict(value).items():
                flat[(key, *sub)] = leaf
        else:
            flat[(key,)] = value
    return flat


def assign_value(spec: Any, path: Path, value: Any) -> None:
    """Set the value at ``path``, rebuilding a tuple on the way when one holds it."""
    parent: Any = None
    parent_key: Any = None
    for key in path[:-1]:
        parent, parent_key = spec, key
        spec = spec[key]
    key = path[-1]
    if isinstance(spec, tuple):
        if parent is None:
            raise ValueError("cannot assign into a tuple at the top of a spec")
        parent[parent_key] = spec[:key] + (value,) + spec[key + 1:]
    else:
        spec[key] = value


def get_value(spec: Any, path: Path) -> Any:
    for key in path:
        spec = spec[key]
    return spec


def deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``base`` with ``update``'s leaves written over it, nested dicts merged."""
    merged = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _sort_key(path: Path) -> tuple[str, ...]:
    # Paths may mix list indices with dict keys; strings compare where int and str would not.
    return tuple(str(p) for p in path)


def _clean_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return re.sub(r"[^a-zA-Z0-9_-]+", "_", str(value)).strip("_")


def _as_domain(value: Any) -> Domain | None:
    if isinstance(value, Domain):
        return value
    if isinstance(value, dict) and len(value) == 1 and "grid_search" in value:
        return Categorical(value["grid_search"]).grid()
    return None


def _split(spec: Any, prefix: Path, resolved: dict[Path, Any],
           unresolved: dict[Path, Domain]) -> None:
    items = spec.items() if isinstance(spec, dict) else enumerate(spec)
    for key, value in items:
        path = (*prefix, key)
        domain = _as_domain(value)
        if domain is not None:
            unresolved[path] = domain
        elif isinstance(value, dict | list | tuple) and value:
            _split(value, path, resolved, unresolved)
        else:
            resolved[path] = value


def _variants(spec: dict[str, Any], constant_grid_search: bool, random_state: RandomState,
              owned: bool = False) -> Iterator[tuple[dict[Path, Any], dict[str, Any]]]:
    if not owned:
        spec = copy.deepcopy(spec)
    _, domain_vars, grid_vars = parse_spec_vars(spec)
    if not domain_vars and not grid_vars:
        yield {}, spec
        return
    constants: dict[Path, Any] = {}
    to_resolve = domain_vars
    if constant_grid_search:
        # Sampled once here and written into ``spec``, so every grid point below carries them.
        constants = _resolve_domain_vars(spec, domain_vars, random_state, allow_fail=True)
        to_resolve = [(p, d) for p, d in domain_vars if p not in constants]
    for point in _grid_points(spec, grid_vars):
        sampled = _resolve_domain_vars(point, to_resolve, random_state)
        for inner_vars, final in _variants(point, constant_grid_search, random_state,
                                           owned=True):
            resolved_vars = {**constants, **sampled}
            for path, _ in grid_vars:
                resolved_vars[path] = get_value(final, path)
            resolved_vars.update(inner_vars)
            yield resolved_vars, final


def _grid_points(spec: dict[str, Any], grid_vars: list[tuple[Path, Categorical]]
                 ) -> Iterator[dict[str, Any]]:
    if not grid_vars:
        yield spec
        return
    skeleton = copy.deepcopy(spec)
    for path, _ in grid_vars:
        # Copying the skeleton per point is cheaper without the grid values inside it.
        assign_value(skeleton, path, None)
    indices = [0] * len(grid_vars)
    while True:
        point = copy.deepcopy(skeleton)
        for (path, domain), index in zip(grid_vars, indices, strict=True):
            assign_value(point, path, domain.categories[index])
        yield point
        axis = 0
        while axis < len(indices):
            indices[axis] += 1
            if indices[axis] < len(grid_vars[axis][1].categories):
                break
            indices[axis] = 0
            axis += 1
        if axis == len(indices):
            return


def _resolve_domain_vars(spec: dict[str, Any], domain_vars: list[tuple[Path, Domain]],
                         random_state: RandomState, allow_fail: bool = False
                         ) -> dict[Path, Any]:
    resolved: dict[Path, Any] = {}
    pending: RecursiveDependencyError | None = None
    for _ in range(_MAX_RESOLUTION_PASSES):
        pending = None
        for path, domain in domain_vars:
            if path in resolved:
                continue
            try:
                value = domain.sample(_UnresolvedAccessGuard(spec), random_state=random_state)
            except RecursiveDependencyError as exc:
                pending = exc
                continue
            except Exception as exc:
                raise ValueError(
                    f"evaluating the search-space value at {'/'.join(map(str, path))} "
                    f"({domain!r}) failed: {exc!r}") from exc
            assign_value(spec, path, value)
            resolved[path] = value
        if pending is None:
            return resolved
    if allow_fail:
        return resolved
    assert pending is not None
    raise pending


class _UnresolvedAccessGuard(dict):
    """A view of a spec for ``sample_from`` functions: attribute access, unresolved guarded."""

    def __getattr__(self, name: str) -> Any:
        try:
            value = dict.__getitem__(self, name)
        except KeyError as exc:
            raise AttributeError(name) from exc
        return _guarded(name, value)

    def __getitem__(self, key: Any) -> Any:
        return _guarded(key, dict.__getitem__(self, key))


def _guarded(name: Any, value: Any) -> Any:
    if _as_domain(value) is not None:
        raise RecursiveDependencyError(f"`{name}` recursively depends on {value!r}")
    if isinstance(value, dict):
        return _UnresolvedAccessGuard(value)
    return value


def unflatten_dict(flat: dict[str, Any], delimiter: str = "/") -> dict[str, Any]:
    """``{"a/b": 1}`` -> ``{"a": {"b": 1}}``: searchers name nested parameters by joined keys."""
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        parts = key.split(delimiter)
        target = nested
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = value
    return nested


def domain_vars_by_name(space: dict[str, Any], searcher: str
                        ) -> dict[str, Domain]:
    """A space's domains keyed ``"a/b"`` by path, for searchers; grid axes refused."""
    _, domain_vars, grid_vars = parse_spec_vars(space)
    if grid_vars:
        raise ValueError(
            f"grid_search cannot be converted to a {searcher} search space; use "
            f"tune.choice for {searcher}, or drop search_alg to cross the grid")
    return {"/".join(map(str, path)): domain for path, domain in domain_vars}

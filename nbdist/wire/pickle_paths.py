"""Where inside a value pickling fails: the path of names to the culprit (layer L1).

`culprits` walks what a value refers to by name, as ``nbdist.util.inspect_serializability``
does: a function's globals and closure variables, a class's or object's own attributes (not
dunders or builtins); it goes into a member that fails to pickle, ``depth`` levels at most,
and reports each failing value none of whose members fails, with its path from the value.
Used only after a pickle failed, to say what to fix (`serialization.check_picklable`).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import cloudpickle


def _fails(value: Any) -> Exception | None:
    try:
        cloudpickle.dumps(value)
    except Exception as exc:
        return exc
    return None


def _members(value: Any) -> Iterator[tuple[str, Any]]:
    if inspect.isfunction(value):
        try:
            closure = inspect.getclosurevars(value)
        except (TypeError, ValueError):
            return
        yield from closure.nonlocals.items()
        yield from closure.globals.items()
        return
    try:
        members = inspect.getmembers(value)
    except Exception:
        return
    for name, member in members:
        if not (name.startswith("__") and name.endswith("__")) and not inspect.isbuiltin(member):
            yield name, member


def culprits(value: Any, name: str, depth: int = 5) -> list[tuple[str, Any, Exception]]:
    """(path like ``f -> helper -> lock``, the value, its pickling error) for each culprit."""
    found: list[tuple[str, Any, Exception]] = []
    seen: set[int] = set()

    def visit(obj: Any, path: tuple[str, ...], left: int) -> bool:
        error = _fails(obj)
        if error is None:
            return True
        if left > 0 and id(obj) not in seen:
            seen.add(id(obj))
            for member_name, member in _members(obj):
                if not visit(member, path + (member_name,), left - 1):
                    return False
        found.append((" -> ".join(path), obj, error))
        return False

    visit(value, (name,), depth)
    return found


def describe(value: Any, name: str) -> str:
    """One sentence naming what keeps ``value`` from pickling, or "" if nothing deeper."""
    found = culprits(value, name)
    if not found or found[0][0] == name:
        return ""
    path, obj, error = found[0]
    return (f" It cannot be pickled because of {path} ({type(obj).__name__}: {error}); "
            "nbdist.util.inspect_serializability shows the whole walk.")

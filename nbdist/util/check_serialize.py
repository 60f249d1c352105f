"""inspect_serializability: find what inside a value keeps it from pickling (Ray's
``ray.util.inspect_serializability``).

Tasks and actors receive their functions and arguments pickled with cloudpickle, so a lock, an
open file or a socket captured somewhere fails the call. The walk: try to pickle the value; if
that fails and depth remains, look inside it — a function's referenced globals and closure
variables, any other object's non-dunder attributes (a class's methods included) — and recurse
into each member that fails in turn. A failing value none of whose members fails (or one at
the depth limit) is reported as a `FailureTuple`: the object, the path of names that leads to
it, and the object that holds it. A report goes to ``print_file`` (stdout by default).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import IO, Any

import cloudpickle


class FailureTuple:
    """One value that does not pickle: ``obj``, the ``path`` of names leading to it from the
    inspected value, and the ``parent`` object that refers to it."""

    def __init__(self, obj: Any, path: tuple[str, ...], parent: Any) -> None:
        self.obj = obj
        self.path = path
        self.parent = parent

    @property
    def name(self) -> str:
        return self.path[-1] if self.path else "unknown"

    def __repr__(self) -> str:
        return (f"FailTuple({self.name} [path={' -> '.join(self.path) or 'unknown'}, "
                f"obj={self.obj}, parent={self.parent}])")


def _pickle_error(value: Any) -> Exception | None:
    try:
        cloudpickle.dumps(value)
    except Exception as exc:
        return exc
    return None


def _members(value: Any) -> Iterator[tuple[str, Any]]:
    """What ``value`` refers to by name: a function's globals and closure variables, or an
    object's (or class's) own attributes other than dunders and builtins."""
    if inspect.isfunction(value):
        closure = inspect.getclosurevars(value)
        yield from closure.globals.items()
        yield from closure.nonlocals.items()
        return
    try:
        members = inspect.getmembers(value)
    except Exception:
        return
    for name, member in members:
        if (name.startswith("__") and name.endswith("__")) or inspect.isbuiltin(member):
            continue
        yield name, member


class _Walk:
    def __init__(self, out: IO[str] | None) -> None:
        self.out = out
        self.failures: list[FailureTuple] = []

    def say(self, level: int, text: str) -> None:
        print("    " * level + text, file=self.out)

    def visit(self, value: Any, path: tuple[str, ...], parent: Any, depth: int,
              level: int) -> bool:
        """True if ``value`` pickles; else records where it fails, looking inside it."""
        error = _pickle_error(value)
        if error is None:
            return True
        self.say(level, f"!!! FAIL serialization: {error}")
        found_inside = False
        if depth > 0:
            for name, member in _members(value):
                self.say(level + 1, f"Serializing {name!r} {_short(member)}...")
                if not self.visit(member, path + (name,), value, depth - 1, level + 1):
                    found_inside = True
                    break
        if not found_inside:
            self.failures.append(FailureTuple(value, path, parent))
        return False


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def inspect_serializability(base_obj: Any, name: str | None = None, depth: int = 3,
                            print_file: IO[str] | None = None
                            ) -> tuple[bool, set[FailureTuple]]:
    """(whether ``base_obj`` pickles, the values found to stop it), looking ``depth`` levels
    into functions and objects; prints what it tried to ``print_file``."""
    walk = _Walk(print_file)
    title = f"Checking Serializability of {_short(base_obj)}"
    rule = "=" * min(len(title), 80)
    walk.say(0, rule)
    walk.say(0, title)
    walk.say(0, rule)
    ok = walk.visit(base_obj, (name,) if name is not None else (), None, depth, 0)
    if not ok:
        walk.say(0, rule)
        walk.say(0, "Variable(s) found to be non-serializable:")
        for failure in walk.failures:
            walk.say(1, repr(failure))
        walk.say(0, "Create such objects inside the task or actor instead of capturing them, "
                    "or pass what is needed to build them.")
        walk.say(0, rule)
    return ok, set(walk.failures)

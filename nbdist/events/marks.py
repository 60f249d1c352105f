"""Marks of library calls: which task records belong to nbdist's own libraries (stdlib only).

nbdist's libraries (Tune, Train, collective groups, placement-group checks, the metrics
aggregator) make calls of their own besides the user's work: polls of a trial, a worker's
preload or setup, a bundle check. A view that drew each of them as a box would bury the user's
work under the plumbing. So such a call carries a `LibraryCall` on its ``TaskSubmitted`` record
(field ``library_call``): the library, the run and member it serves (as on ``RunUpdate``: a
search and a trial id, a training run and "rank N"), and its role:

    "control"   plumbing: polls, preloads, module checks, setup/teardown, info, bundle checks;
                views hide these by default and fold them into the run they serve
    "work"      the call that runs the user's code for that member (a trial's ``run``, a rank's
                training loop): views show it as the trial or the rank

A library marks a call through the public API, so the mark works on every backend: the
``library_call=`` option of ``.options(...)`` (remote functions, actor classes, actor methods),
or `library_call(...)` around a block of calls (every call submitted by this thread or task in
the block, unless its own option says otherwise). The mark is read on the submitting thread
when the record is made (`current_library_call`): a context variable, cheap on the hot path.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any, NamedTuple

ROLES = ("control", "work")


class LibraryCall(NamedTuple):
    """The mark of a library's call (see the module docstring)."""
    library: str  # "tune", "train", "collective", "placement_group", "metrics", ...
    run: str = ""  # the run it serves (a search's or a training run's name), "" if none
    member: str = ""  # the member it serves (a trial id, "rank N"), "" if none
    role: str = "control"  # "control" or "work"

    @property
    def internal(self) -> bool:
        return self.role != "work"


_current: contextvars.ContextVar[LibraryCall | None] = contextvars.ContextVar(
    "nbdist_library_call", default=None)


def as_library_call(value: Any) -> LibraryCall:
    """``value`` (a `LibraryCall`, a library's name, or a tuple of its fields) as a mark; a
    ValueError saying what is expected otherwise."""
    if isinstance(value, LibraryCall):
        mark = value
    elif isinstance(value, str):
        mark = LibraryCall(value)
    elif isinstance(value, (tuple, list)) and 1 <= len(value) <= 4:
        mark = LibraryCall(*value)
    else:
        raise ValueError(f"library_call must be a LibraryCall, a library's name or a tuple "
                         f"(library, run, member, role), not {value!r}.")
    if not mark.library or not all(isinstance(v, str) for v in mark):
        raise ValueError(f"library_call needs a library's name and string fields: {value!r}.")
    if mark.role not in ROLES:
        raise ValueError(f"library_call's role must be one of {ROLES}, not {mark.role!r}.")
    return mark


@contextlib.contextmanager
def library_call(library: str | LibraryCall, run: str = "", member: str = "",
                 role: str = "control") -> Iterator[LibraryCall]:
    """Mark every call submitted by this thread (or asyncio task) inside the block."""
    mark = as_library_call(library if isinstance(library, LibraryCall)
                           else (library, run, member, role))
    token = _current.set(mark)
    try:
        yield mark
    finally:
        _current.reset(token)


def current_library_call() -> LibraryCall | None:
    """The mark of calls submitted here now (None: the user's own calls)."""
    return _current.get()

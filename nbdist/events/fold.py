"""What the folds of the event stream share: which task makes which object, which tasks wait
for which objects, and the refs passed between groups of tasks (layer L0: stdlib only).

The engine's tally (`nbdist.events.tally`, ids as ints) and the panel's model
(`nbdist.jupyter.model`, ids as the hex strings of the records) both keep a `DepFold`: ids and
groups are opaque to it (any hashable), so each keeps its own id form and its own group key.
Read it through `nbdist.events`, which re-exports it.

    producer  object id -> (task id, group) of the unfinished or finished task that returns
              it; dropped when the object is freed (no new task can take it then)
    waiting   object id -> ids of the tasks that take it and wait for it (a tuple: plain
              values the garbage collector stops scanning)
    edges     (producing group, consuming group) -> refs passed from one to the other

Not thread-safe: its owner holds its own lock around every call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

Edge = tuple[Any, Any]
_NOTHING: tuple[()] = ()


class DepFold:
    """See the module docstring."""

    __slots__ = ("edges", "producer", "waiting")

    def __init__(self) -> None:
        self.producer: dict[Any, tuple[Any, Any]] = {}
        self.waiting: dict[Any, tuple[Any, ...]] = {}
        self.edges: dict[Edge, int] = {}

    def submitted(self, task_id: Any, group: Any, deps: Iterable[Any], returns: Iterable[Any],
                  available: Callable[[Any], bool]
                  ) -> tuple[int, list[Any] | tuple[()], list[Edge] | tuple[()]]:
        """A task of ``group`` that takes ``deps`` and returns ``returns``: the refs it takes
        counted on the edges from their producers' groups; it waits for the deps that are not
        ``available``. Returns how many it waits for, the tasks producing its deps (in order,
        those known), and the edges counted."""
        missing = 0
        dep_tasks: list[Any] | tuple[()] = _NOTHING
        touched: list[Edge] | tuple[()] = _NOTHING
        if deps:
            producer, edges, waiting = self.producer, self.edges, self.waiting
            dep_tasks, touched = [], []
            for dep in deps:
                made = producer.get(dep)
                if made is not None:
                    dep_tasks.append(made[0])
                    edge = (made[1], group)
                    edges[edge] = edges.get(edge, 0) + 1
                    touched.append(edge)
                if not available(dep):
                    waiting[dep] = (*waiting.get(dep, _NOTHING), task_id)
                    missing += 1
        made_here = (task_id, group)
        producer = self.producer
        for oid in returns:
            producer[oid] = made_here
        return missing, dep_tasks, touched

    def ready(self, oid: Any) -> tuple[Any, ...]:
        """The object exists now (or holds its task's error): the tasks that waited for it."""
        return self.waiting.pop(oid, _NOTHING)

    def freed(self, oid: Any) -> None:
        self.producer.pop(oid, None)

    def forget_tasks(self) -> None:
        """Forget producers and waiting tasks, keep the edges (the panel's model switching to
        groups: from then on the engine's summary says how far tasks are)."""
        self.producer = {}
        self.waiting = {}

"""Lineage of generator values made on another node, and their rebuild (layer L1).

A generator task (``num_returns="dynamic"`` or streaming) that another node ran for us leaves
its values in that node's store, under that node's ids: only the generator's one return (the
refs of its values, in the order they were yielded) comes back here. So that those values
survive the loss of that node, as in Ray, this table keeps a `Record` per such task while its
retries last: its spec (its arguments stay pinned, `_pin`) and the ids of its values by index
(``by_item``: value id -> record, the ids the object table watches). A record goes, and lets go
of the arguments, when the last of its values leaves this node's object table (`forget`,
called by the table).

When that node is lost, `lost` gives the specs of the tasks to run again: the same
function and arguments, ``num_returns`` 0, no retries, and ``extra["rebuild"]`` listing by
index the ids of the values not copied here yet (None for the others). The worker stores the
i-th value its generator yields under the i-th id (`nbdist.driver.generators`), so the refs the
caller holds now read the new values. While the task runs, ``rebuilding`` (value id -> the
task's id) tells the object table to wait for those ids instead of failing them as lost. When
the task ends (`ended`), the ids it did not store fail: with its error if it failed, else with
`ObjectLostError` (its generator yielded fewer values than before). A task whose retries are
used up is not run again: its values fail as lost, as any object of a lost node.

Each rerun uses one of the task's retries (``max_retries``, as Ray's lineage reconstruction
does). The rerun is placed as any task (a soft pin to the lost node dropped): here, or on a
node with its resources, which sends the values it stored back here ahead of the task's end
(`NodeState._send_rebuilt`), since they are ours to keep.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from nbdist.ids import CLIENT_SHIFT, NODE_SHIFT
from nbdist.scheduler.records import READY, Client, Obj
from nbdist.wire import protocol as P

LINEAGE = "lineage"  # the kind of the `Client` that owns rebuild tasks (no connection)


class Record:
    __slots__ = ("spec", "items", "retries", "left")

    def __init__(self, spec: tuple, items: tuple[int, ...], retries: int) -> None:
        self.spec = spec
        self.items = items
        self.retries = retries  # reruns left (-1 or a huge number: no limit)
        self.left = len(items)  # values still in the object table (or about to be)


class Lineage:
    def __init__(self, node_index: int, objs: dict[int, Obj],
                 incref: Callable[[int], None], decref: Callable[[int], None]) -> None:
        self.node_index = node_index
        self.objs = objs
        self.incref = incref
        self.decref = decref
        self.records: dict[int, Record] = {}  # original task id -> record
        self.by_item: dict[int, Record] = {}
        self.rebuilding: dict[int, int] = {}  # value id -> id of the task making it again
        # Rebuild tasks take ids of a client number no connection gets (the last of the node).
        self.owner = Client(None, LINEAGE, (node_index << NODE_SHIFT) | ((1 << NODE_SHIFT) - 1),
                            0, 0)
        self._ids = itertools.count(1)

    def record(self, spec: tuple, index: int, locs: list) -> None:
        """A generator task node ``index`` ran for us ended with ``locs``: keep its lineage if
        values of that node are in its return and it may run again."""
        retries = (spec[P.S_EXTRA] or {}).get("generator", 0)
        if not retries or spec[P.S_ACTOR]:
            return
        items = tuple(c for loc in locs for c in (loc[3] if len(loc) > 3 else ())
                      if c >> P.OWNER_SHIFT == index)
        if not items or spec[P.S_TASK_ID] in self.records:
            return
        rec = Record(spec, items, retries)
        self.records[spec[P.S_TASK_ID]] = rec
        for oid in items:
            self.by_item[oid] = rec
        self._pin(spec, 1)

    def settle(self, task_id: int) -> None:
        """The task's return was stored here, holding its values (or dropped, nobody holding
        it): those not in the object table are gone already."""
        rec = self.records.get(task_id)
        if rec is not None:
            for oid in rec.items:
                if oid not in self.objs:
                    self.forget(oid)

    def forget(self, oid: int) -> None:
        """Value ``oid`` left the object table: its record goes with the last of them."""
        rec = self.by_item.pop(oid, None)
        if rec is None:
            return
        rec.left -= 1
        if rec.left <= 0 and self.records.get(rec.spec[P.S_TASK_ID]) is rec:
            del self.records[rec.spec[P.S_TASK_ID]]
            self._pin(rec.spec, -1)

    def lost(self, index: int) -> tuple[list[tuple], list[int]]:
        """Node ``index`` is gone: the specs of the tasks to run again, and the ids of values
        that cannot be rebuilt (no retries left)."""
        specs: list[tuple] = []
        unbuildable: list[int] = []
        objs = self.objs
        for task_id, rec in list(self.records.items()):
            needed = [oid if oid >> P.OWNER_SHIFT == index and _pending(objs.get(oid)) else None
                      for oid in rec.items]
            if not any(needed):
                continue
            if rec.retries == 0:
                unbuildable.extend(oid for oid in needed if oid)
                continue
            if rec.retries > 0:
                rec.retries -= 1
            new_id = (self.owner.client_no << CLIENT_SHIFT) | next(self._ids)
            spec = rec.spec
            extra = {**(spec[P.S_EXTRA] or {}), "rebuild": needed, "rebuilds": task_id}
            specs.append((new_id, *spec[P.S_TASK_ID + 1:P.S_NRET], 0, spec[P.S_RESOURCES], 0,
                          False, *spec[P.S_ACTOR:P.S_EXTRA], extra, *spec[P.S_EXTRA + 1:]))
            for oid in needed:
                if oid:
                    self.rebuilding[oid] = new_id
        return specs, unbuildable

    def ended(self, spec: tuple) -> list[int]:
        """A rebuild task ended: the ids it was to make that are still not here."""
        out = []
        for oid in (spec[P.S_EXTRA] or {}).get("rebuild") or ():
            if oid and self.rebuilding.get(oid) == spec[P.S_TASK_ID]:
                del self.rebuilding[oid]
                if _pending(self.objs.get(oid)):
                    out.append(oid)
        return out

    def _pin(self, spec: tuple, sign: int) -> None:
        """A record keeps the task's arguments alive, to run it again."""
        op = self.incref if sign > 0 else self.decref
        for dep in spec[P.S_DEPS]:
            op(dep)
        for inner in spec[P.S_CONTAINED]:
            op(inner)


def _pending(obj: Obj | None) -> bool:
    """Referenced here, and its value not here (never copied here)."""
    return obj is not None and obj.state != READY

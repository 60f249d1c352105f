"""``GroupedData``: ``Dataset.groupby(key)`` and its aggregations (Ray Data's names).

Aggregations run as `alltoall.groupby_aggregate` (range partition by key, Arrow's
``group_by`` per range); results are sorted by key with Ray's column names (``count()``,
``sum(x)``, ``mean(x)``, ...). ``groupby(None)`` aggregates the whole dataset into one row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import alltoall as A

if TYPE_CHECKING:
    from .dataset import Dataset

_ARROW = {"count": "count", "sum": "sum", "min": "min", "max": "max", "mean": "mean",
          "std": "std"}


class AggregateFn:
    """An aggregation: a built-in one of ``on`` by name (``Count()``, ``Sum("x")``, ...), or
    Ray's custom form ``AggregateFn(init, merge, name, accumulate_row=...,
    accumulate_block=..., finalize=...)``: ``init(key)`` starts a group's accumulator,
    ``accumulate_row(acc, row)`` (or ``accumulate_block(acc, table)``) adds its rows,
    ``finalize(acc)`` gives the result. All rows of a group meet in one task, so ``merge`` is
    accepted but not needed."""
    fn = ""

    def __init__(self, on: Any = None, alias_name: str | None = None, *args: Any,
                 name: str | None = None, init: Any = None, merge: Any = None,
                 accumulate_row: Any = None, accumulate_block: Any = None,
                 finalize: Any = None, ddof: int = 1, **kwargs: Any) -> None:
        if callable(on) or init is not None:  # the custom form: (init, merge, name, ...)
            self.fn = "custom"
            self.init = init if init is not None else on
            self.merge = merge if merge is not None else alias_name
            self.accumulate_row, self.accumulate_block = accumulate_row, accumulate_block
            self.finalize = finalize
            self.on = None
            self.name = name or (args[0] if args else None) or "custom"
            if accumulate_row is None and accumulate_block is None:
                raise TypeError("AggregateFn needs accumulate_row or accumulate_block.")
            return
        self.on = on
        self.ddof = ddof
        self.name = alias_name or (f"{self.fn}({on})" if on else f"{self.fn}()")

    def custom_spec(self) -> tuple[Any, ...]:
        return (self.init, self.accumulate_row, self.accumulate_block, self.finalize)


class Count(AggregateFn):
    fn = "count"


class Sum(AggregateFn):
    fn = "sum"


class Min(AggregateFn):
    fn = "min"


class Max(AggregateFn):
    fn = "max"


class Mean(AggregateFn):
    fn = "mean"


class Std(AggregateFn):
    fn = "std"


class GroupedData:
    def __init__(self, dataset: Dataset, key: str | list[str] | None) -> None:
        self._ds = dataset
        self._keys = [] if key is None else ([key] if isinstance(key, str) else list(key))

    def aggregate(self, *aggs: AggregateFn) -> Dataset:
        specs = [(a.on or "", "custom", a.name, a.custom_spec()) if a.fn == "custom"
                 else (a.on or "", _ARROW[a.fn], a.name, getattr(a, "ddof", 1)) for a in aggs]
        keys = self._keys
        if not keys:
            return self._ds.add_column("__all", lambda df: [0] * len(df)).groupby(
                "__all").aggregate(*aggs).drop_columns(["__all"])
        return self._ds._all("Aggregate", lambda bl, exe: A.groupby_aggregate(
            bl, keys, specs, exe))

    def _each(self, fn: type[AggregateFn], on: str | list[str] | None) -> Dataset:
        cols = [on] if isinstance(on, str) else list(on or [])
        if not cols:
            cols = [c for c in self._ds.columns() if c not in self._keys]
        return self.aggregate(*[fn(c) for c in cols])

    def count(self) -> Dataset:
        return self.aggregate(Count())

    def sum(self, on: str | list[str] | None = None, **kwargs: Any) -> Dataset:
        return self._each(Sum, on)

    def min(self, on: str | list[str] | None = None, **kwargs: Any) -> Dataset:
        return self._each(Min, on)

    def max(self, on: str | list[str] | None = None, **kwargs: Any) -> Dataset:
        return self._each(Max, on)

    def mean(self, on: str | list[str] | None = None, **kwargs: Any) -> Dataset:
        return self._each(Mean, on)

    def std(self, on: str | list[str] | None = None, ddof: int = 1, **kwargs: Any) -> Dataset:
        cols = [on] if isinstance(on, str) else list(on or [])
        if not cols:
            cols = [c for c in self._ds.columns() if c not in self._keys]
        return self.aggregate(*[Std(c, ddof=ddof) for c in cols])

    def map_groups(self, fn: Any, *, batch_format: str | None = "default",
                   fn_args: Any = None, **kwargs: Any) -> Dataset:
        keys, args, fmt = self._keys, tuple(fn_args or ()), batch_format or "default"
        if not keys:
            return self._ds.repartition(1).map_batches(fn, batch_format=fmt, fn_args=args)
        return self._ds._all("MapGroups", lambda bl, exe: A.map_groups(
            bl, keys, fn, fmt, args, exe))


__all__ = ["AggregateFn", "Count", "GroupedData", "Max", "Mean", "Min", "Std", "Sum"]

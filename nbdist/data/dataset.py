"""``Dataset``: a lazy plan over Arrow blocks, with Ray Data's transforms and consumers.

Transforms return a new `Dataset` with one more operator on its `Plan`; consumers execute
the plan with the streaming executor (each consumption runs it again, as Ray Data does,
unless the dataset was materialized). Row-wise results (``take``, ``iter_rows``) are dicts;
batches come in the format asked for (numpy dicts by default, pandas, pyarrow).
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

import nbdist
from nbdist.exceptions import NbdistError

from . import alltoall as A
from . import block as B
from .context import DataContext
from .executor import ExecContext, execute
from .iterator import DataIterator
from .plan import AllToAllOp, BlockRef, LimitOp, MapOp, Plan, Source, refs_source
from .transforms import Transform

_ids = itertools.count(1)
_runs = itertools.count()


class Dataset(DataIterator):
    """A distributed collection of rows in Arrow blocks (Ray Data's ``Dataset``)."""

    def __init__(self, plan: Plan, name: str | None = None) -> None:
        self._plan = plan
        self._name = name or f"dataset_{next(_ids)}"
        self._last: ExecContext | None = None

    # -- plumbing ---------------------------------------------------------------------------
    def _with(self, op: Any) -> Dataset:
        return Dataset(self._plan.with_op(op))

    def _run_name(self) -> str:
        """The name of one execution of this dataset (``dataset_3_0``, as Ray Data names it):
        each is a run of its own in the views and on the progress line."""
        return f"{self._name}_{next(_runs)}"

    def _map(self, kind: str, fn: Any, options: dict[str, Any], *, compute: str = "tasks",
             concurrency: Any = None, remote_args: dict[str, Any] | None = None,
             keeps_rows: bool = False) -> Dataset:
        op = MapOp((Transform(kind, fn, options),), compute, concurrency,
                   {k: v for k, v in (remote_args or {}).items() if v is not None}, keeps_rows)
        return self._with(op)

    def _all(self, name: str, fn: Callable[[list[BlockRef], ExecContext], list[BlockRef]],
             keeps_rows: bool = False) -> Dataset:
        return self._with(AllToAllOp(name, fn, keeps_rows))

    def iter_internal_ref_bundles(self) -> Iterator[BlockRef]:
        stream, self._last = execute(self._plan, self._run_name())
        return stream

    def _block_refs(self) -> Iterator[BlockRef]:
        return self.iter_internal_ref_bundles()

    # -- one-to-one transforms ------------------------------------------------------------
    def map(self, fn: Any, *, fn_args: Any = None, fn_kwargs: Any = None,
            fn_constructor_args: Any = None, fn_constructor_kwargs: Any = None,
            num_cpus: float | None = None, num_gpus: float | None = None,
            concurrency: Any = None, **ray_remote_args: Any) -> Dataset:
        return self._udf("map", fn, {}, fn_args, fn_kwargs, fn_constructor_args,
                         fn_constructor_kwargs, num_cpus, num_gpus, concurrency,
                         ray_remote_args, keeps_rows=True)

    def map_batches(self, fn: Any, *, batch_size: int | None | str = None,
                    batch_format: str | None = "default", zero_copy_batch: bool = False,
                    fn_args: Any = None, fn_kwargs: Any = None, fn_constructor_args: Any = None,
                    fn_constructor_kwargs: Any = None, num_cpus: float | None = None,
                    num_gpus: float | None = None, concurrency: Any = None,
                    **ray_remote_args: Any) -> Dataset:
        if batch_format not in B.BATCH_FORMATS and batch_format is not None:
            raise NbdistError(f"batch_format must be one of {B.BATCH_FORMATS}, "
                              f"not {batch_format!r}.")
        size = None if batch_size in (None, "auto") else int(batch_size)
        return self._udf("map_batches", fn, {"batch_size": size, "batch_format": batch_format},
                         fn_args, fn_kwargs, fn_constructor_args, fn_constructor_kwargs,
                         num_cpus, num_gpus, concurrency, ray_remote_args)

    def flat_map(self, fn: Any, *, fn_args: Any = None, fn_kwargs: Any = None,
                 fn_constructor_args: Any = None, fn_constructor_kwargs: Any = None,
                 num_cpus: float | None = None, num_gpus: float | None = None,
                 concurrency: Any = None, **ray_remote_args: Any) -> Dataset:
        return self._udf("flat_map", fn, {}, fn_args, fn_kwargs, fn_constructor_args,
                         fn_constructor_kwargs, num_cpus, num_gpus, concurrency,
                         ray_remote_args)

    def filter(self, fn: Any = None, expr: Any = None, **kwargs: Any) -> Dataset:
        if (fn is None) == (expr is None):
            raise NbdistError("filter takes a function or an expression (expr=...), one "
                              "of the two.")
        if isinstance(fn, str):
            fn, expr = None, fn
        if expr is not None:
            return self._map("filter", None, {"expr": expr})
        return self._udf("filter", fn, {}, kwargs.get("fn_args"), kwargs.get("fn_kwargs"),
                         kwargs.get("fn_constructor_args"),
                         kwargs.get("fn_constructor_kwargs"), kwargs.get("num_cpus"),
                         kwargs.get("num_gpus"), kwargs.get("concurrency"), {})

    def _udf(self, kind: str, fn: Any, options: dict[str, Any], fn_args: Any, fn_kwargs: Any,
             ctor_args: Any, ctor_kwargs: Any, num_cpus: Any, num_gpus: Any,
             concurrency: Any, remote_args: dict[str, Any], keeps_rows: bool = False) -> Dataset:
        options = {**options, "fn_args": tuple(fn_args or ()), "fn_kwargs": dict(fn_kwargs or {}),
                   "fn_constructor_args": tuple(ctor_args or ()),
                   "fn_constructor_kwargs": dict(ctor_kwargs or {})}
        is_class = inspect.isclass(fn)
        if not is_class and not callable(fn):
            raise NbdistError(f"{kind} needs a function or a callable class, not {fn!r}.")
        if not is_class and (ctor_args or ctor_kwargs):
            raise NbdistError(f"fn_constructor_args are for a callable class; {fn!r} is a "
                              f"function.")
        args = {**remote_args, "num_cpus": num_cpus, "num_gpus": num_gpus}
        compute = "actors" if is_class else "tasks"
        return self._map(kind, fn, options, compute=compute, concurrency=concurrency,
                         remote_args=args, keeps_rows=keeps_rows)

    def add_column(self, col: str, fn: Callable[[Any], Any], *,
                   batch_format: str = "pandas", **kwargs: Any) -> Dataset:
        return self._map("add_column", fn, {"col": col, "batch_format": batch_format},
                         keeps_rows=True)

    def drop_columns(self, cols: list[str], **kwargs: Any) -> Dataset:
        return self._map("drop", None, {"cols": list(cols)}, keeps_rows=True)

    def select_columns(self, cols: list[str] | str, **kwargs: Any) -> Dataset:
        cols = [cols] if isinstance(cols, str) else list(cols)
        return self._map("select", None, {"cols": cols}, keeps_rows=True)

    def rename_columns(self, names: dict[str, str] | list[str], **kwargs: Any) -> Dataset:
        if isinstance(names, list):
            names = dict(zip(self.columns(), names, strict=False))
        return self._map("rename", None, {"names": dict(names)}, keeps_rows=True)

    def random_sample(self, fraction: float, *, seed: int | None = None) -> Dataset:
        if not 0 <= fraction <= 1:
            raise NbdistError(f"random_sample's fraction must be in [0, 1], not {fraction}.")
        return self._map("sample", None, {"fraction": fraction, "seed": seed})

    def limit(self, limit: int) -> Dataset:
        return self._with(LimitOp(int(limit)))

    # -- all-to-all transforms ------------------------------------------------------------
    def repartition(self, num_blocks: int, *, shuffle: bool = False, **kwargs: Any) -> Dataset:
        return self._all(f"Repartition[{num_blocks}]",
                         lambda bl, exe: A.repartition(bl, num_blocks, shuffle, exe), True)

    def random_shuffle(self, *, seed: int | None = None, num_blocks: int | None = None,
                       **kwargs: Any) -> Dataset:
        return self._all("RandomShuffle",
                         lambda bl, exe: A.random_shuffle(bl, seed, exe, num_blocks), True)

    def randomize_block_order(self, *, seed: int | None = None) -> Dataset:
        def shuffle(blocks: list[BlockRef], exe: ExecContext) -> list[BlockRef]:
            order = np.random.default_rng(seed).permutation(len(blocks))
            return [blocks[i] for i in order]
        return self._all("RandomizeBlockOrder", shuffle, True)

    def sort(self, key: str | list[str], descending: bool | list[bool] = False) -> Dataset:
        keys = [key] if isinstance(key, str) else list(key)
        desc = descending if isinstance(descending, list) else [descending] * len(keys)
        spec = [(k, "descending" if d else "ascending") for k, d in zip(keys, desc, strict=False)]
        return self._all("Sort", lambda bl, exe: A.sort(bl, spec, exe), True)

    def groupby(self, key: str | list[str] | None) -> Any:
        from .grouped import GroupedData

        return GroupedData(self, key)

    def union(self, *others: Dataset) -> Dataset:
        plans = [self._plan] + [o._plan for o in others]
        def items(exe: ExecContext) -> Iterator[BlockRef]:
            for p in plans:
                stream, _ = execute(p, exe.name)
                yield from stream
        rows = [p.known_rows for p in plans]
        known = None if any(r is None for r in rows) else sum(r or 0 for r in rows)
        return Dataset(Plan(Source("Union", items, None, known)))

    def zip(self, other: Dataset) -> Dataset:
        return self._all("Zip", lambda bl, exe: A.zip_blocks(
            bl, list(other.iter_internal_ref_bundles()), exe), True)

    # -- splits -----------------------------------------------------------------------------
    def materialize(self) -> MaterializedDataset:
        blocks = list(self.iter_internal_ref_bundles())
        return MaterializedDataset(Plan(refs_source("FromBlocks", blocks)), self._name,
                                   blocks, self._last)

    def split_at_indices(self, indices: list[int]) -> list[MaterializedDataset]:
        if any(a > b for a, b in zip(indices, indices[1:], strict=False)) or any(i < 0 for i in indices):
            raise NbdistError(f"split_at_indices needs sorted non-negative indices, "
                              f"not {indices}.")
        blocks = self.materialize()._blocks
        total = sum(b.meta.num_rows for b in blocks)
        cuts = [0] + [min(i, total) for i in indices] + [total]
        exe = ExecContext(self._run_name(), DataContext.get_current())
        out = A.slice_rows(blocks, list(zip(cuts[:-1], cuts[1:], strict=False)), exe, "Split")
        return [MaterializedDataset(Plan(refs_source("FromBlocks", [b])), self._name, [b])
                for b in out]

    def split(self, n: int, *, equal: bool = False,
              locality_hints: Any = None) -> list[MaterializedDataset]:
        if n <= 0:
            raise NbdistError(f"split needs n >= 1, not {n}.")
        blocks = self.materialize()._blocks
        total = sum(b.meta.num_rows for b in blocks)
        if equal:
            per = total // n
            return self.split_at_indices([per * i for i in range(1, n + 1)])[:n]
        return self.split_at_indices([total * i // n for i in range(1, n)])

    def train_test_split(self, test_size: float | int, *, shuffle: bool = False,
                         seed: int | None = None, **kwargs: Any) -> list[MaterializedDataset]:
        ds = self.random_shuffle(seed=seed) if shuffle else self
        total = ds.count()
        n_test = int(test_size) if isinstance(test_size, int) else int(total * test_size)
        if not 0 <= n_test <= total:
            raise NbdistError(f"test_size {test_size} does not fit a dataset of {total} rows.")
        train, test = ds.split_at_indices([total - n_test])
        return [train, test]

    def streaming_split(self, n: int, *, equal: bool = False,
                        locality_hints: Any = None) -> list[DataIterator]:
        from .split import streaming_split

        return streaming_split(self, n, equal, locality_hints=locality_hints)

    def iterator(self) -> DataIterator:
        """A `DataIterator` over the whole dataset: each pass over it is a new execution, in
        the process that iterates (it can be sent to a task or an actor)."""
        return DatasetIterator(self)

    # -- consumers --------------------------------------------------------------------------
    def count(self) -> int:
        known = self._plan.known_rows
        if known is not None:
            return known
        return sum(b.meta.num_rows for b in self.iter_internal_ref_bundles())

    def schema(self) -> pa.Schema | None:
        for b in self.limit(1).iter_internal_ref_bundles() if not isinstance(
                self, MaterializedDataset) else self._blocks:
            if b.meta.schema is not None and b.meta.schema.names:
                return b.meta.schema
        return None

    def columns(self, fetch_if_missing: bool = True) -> list[str]:
        schema = self.schema()
        return list(schema.names) if schema is not None else []

    def num_blocks(self) -> int:
        return len(list(self.iter_internal_ref_bundles()))

    def _aggregate(self, on: str | list[str] | None, what: str, ddof: int = 1) -> Any:
        cols = ([on] if isinstance(on, str) else list(on)) if on is not None else self.columns()
        partials = Dataset(self._plan.project(cols), self._name)._map(
            "partial", A.partial_block, {"cols": cols, "need": A.NEEDS[what]})
        refs = [b.ref for b in partials.iter_internal_ref_bundles()]
        rows = [row for table in nbdist.get(refs) for row in table.to_pylist()]
        result = A.combine_partials(rows, cols, ddof)
        values = [result[c][what] if c in result else None for c in cols]
        if isinstance(on, str):
            return values[0]
        return {f"{what}({c})": v for c, v in zip(cols, values, strict=False)}

    def sum(self, on: Any = None, ignore_nulls: bool = True) -> Any:
        return self._aggregate(on, "sum")

    def min(self, on: Any = None, ignore_nulls: bool = True) -> Any:
        return self._aggregate(on, "min")

    def max(self, on: Any = None, ignore_nulls: bool = True) -> Any:
        return self._aggregate(on, "max")

    def mean(self, on: Any = None, ignore_nulls: bool = True) -> Any:
        return self._aggregate(on, "mean")

    def std(self, on: Any = None, ddof: int = 1, ignore_nulls: bool = True) -> Any:
        return self._aggregate(on, "std", ddof)

    def aggregate(self, *aggs: Any) -> dict[str, Any] | None:
        """The whole dataset aggregated (``Count()``, ``Sum("x")``, a custom `AggregateFn`),
        as a dict of the aggregations' names, as Ray Data returns it."""
        rows = self.groupby(None).aggregate(*aggs).take_all()
        return rows[0] if rows else None

    def unique(self, column: str, **kwargs: Any) -> list[Any]:
        rows = self.groupby(column).count().take_all()
        return [r[column] for r in rows]

    def to_numpy_refs(self, *, column: str | None = None) -> list[Any]:
        fn = (lambda b: B.column_numpy(b.column(column))) if column else \
            (lambda b: B.to_batch(b, "numpy"))
        return [nbdist.remote(fn).remote(b.ref) for b in self.iter_internal_ref_bundles()]

    def to_arrow_refs(self) -> list[Any]:
        return [b.ref for b in self.iter_internal_ref_bundles()]

    def stats(self) -> str:
        if self._last is None:
            return "The dataset has not been executed yet."
        return "\n".join(s.summary() for s in self._last.stats)

    def __repr__(self) -> str:
        return f"Dataset({self._plan.describe()})"

    def write_parquet(self, path: str, *, filesystem: Any = None, **kwargs: Any) -> None:
        self._write("parquet", path, filesystem, kwargs)

    def write_csv(self, path: str, *, filesystem: Any = None, **kwargs: Any) -> None:
        self._write("csv", path, filesystem, kwargs)

    def write_json(self, path: str, *, filesystem: Any = None, **kwargs: Any) -> None:
        self._write("json", path, filesystem, kwargs)

    def write_numpy(self, path: str, *, column: str, filesystem: Any = None,
                    **kwargs: Any) -> None:
        self._write("npy", path, filesystem, {**kwargs, "column": column})

    def _write(self, fmt: str, path: str, filesystem: Any, kwargs: dict[str, Any]) -> None:
        from .io import prepare_write, write_block

        opts = prepare_write(fmt, path, filesystem, kwargs)
        ds = self._map("write", write_block, opts)
        for _ in ds.iter_internal_ref_bundles():
            pass


class MaterializedDataset(Dataset):
    """A dataset whose blocks are in the store: consuming it runs nothing again."""

    def __init__(self, plan: Plan, name: str, blocks: list[BlockRef],
                 last: ExecContext | None = None) -> None:
        super().__init__(plan, name)
        self._blocks = blocks
        self._last = last

    def iter_internal_ref_bundles(self) -> Iterator[BlockRef]:
        if not self._plan.ops:
            return iter(self._blocks)
        return super().iter_internal_ref_bundles()

    def stats(self) -> str:
        return super().stats()


class DatasetIterator(DataIterator):
    """A whole dataset as a `DataIterator` (``Dataset.iterator()``, and what Train gives every
    rank of a dataset it does not split); ``ctx``: the knobs of its executions (by default,
    the context current where it iterates)."""

    def __init__(self, dataset: Dataset, ctx: DataContext | None = None) -> None:
        self.dataset = dataset
        self.ctx = ctx

    def _block_refs(self) -> Iterator[BlockRef]:
        ds = self.dataset
        if isinstance(ds, MaterializedDataset):
            return ds.iter_internal_ref_bundles()
        stream, ds._last = execute(ds._plan, ds._run_name(), self.ctx)
        return stream

    def schema(self) -> pa.Schema | None:
        return self.dataset.schema()

    def __repr__(self) -> str:
        return f"DataIterator({self.dataset!r})"

"""``nbdist.data``: Ray Data's API on Arrow blocks in nbdist's object store.

``from nbdist import data`` (or ``import nbdist.data``): datasets are lazy plans over blocks
(``pyarrow.Table``s passed by ref), run by a streaming executor with bounded in-flight blocks
as tasks and actor pools through nbdist's public API only, so they run on
``nbdist.init(backend="ray")`` too.

    block.py        blocks and batch formats (numpy dicts, pandas, pyarrow), tensors
    transforms.py   what a one-to-one operator does to a block (map, filter, columns, ...)
    plan.py         the lazy plan: a source and its operators
    executor.py     the streaming executor: task and actor-pool stages, backpressure
    alltoall.py     sort, groupby, shuffle, repartition, zip, whole-dataset aggregates
    dataset.py      Dataset and MaterializedDataset
    iterator.py     DataIterator: rows, batches, torch batches, pandas
    grouped.py      GroupedData and aggregate functions
    split.py        streaming_split: shards for Train's ranks fed by one execution
    io.py           read_* and write_* over pyarrow's filesystems
    context.py      DataContext knobs
    stats.py        per-operator counters, the progress line, RunUpdate events
    preprocessors/  StandardScaler, MinMaxScaler, OneHotEncoder, LabelEncoder, ...
"""

from __future__ import annotations

import builtins
import importlib
import math
from typing import Any

import numpy as np
import pyarrow as pa

import nbdist

from . import block as B
from . import io as _io
from .context import DataContext, ExecutionOptions, ExecutionResources
from .dataset import Dataset, MaterializedDataset
from .grouped import AggregateFn, Count, GroupedData, Max, Mean, Min, Std, Sum
from .iterator import DataIterator
from .plan import BlockRef, Plan, ReadTask, reads_source, refs_source

_ROWS_PER_BLOCK = 1_000_000


def _default_blocks(n: int, override: int | None) -> int:
    if override is not None:
        return max(1, int(override))
    return builtins.max(1, builtins.min(n, builtins.max(4, math.ceil(n / _ROWS_PER_BLOCK))))


def _range_block(start: int, stop: int, shape: tuple[int, ...] | None) -> pa.Table:
    ids = np.arange(start, stop, dtype=np.int64)
    if shape is None:
        return pa.table({"id": ids})
    data = np.ones((len(ids), *shape), dtype=np.int64) * ids.reshape((-1,) + (1,) * len(shape))
    return B.from_batch({"data": data})


def _ranges(n: int, blocks: int, shape: tuple[int, ...] | None, name: str) -> Dataset:
    cuts = [n * i // blocks for i in builtins.range(blocks + 1)]
    tasks = [ReadTask(_range_block, (a, b, shape), b - a) for a, b in zip(cuts[:-1], cuts[1:], strict=False)]
    return Dataset(Plan(reads_source(name, tasks)))


def range(n: int, *, override_num_blocks: int | None = None, **kwargs: Any) -> Dataset:
    """Rows ``{"id": 0}`` ... ``{"id": n-1}``."""
    return _ranges(n, _default_blocks(n, override_num_blocks), None, "ReadRange")


def range_tensor(n: int, *, shape: tuple[int, ...] = (1,),
                 override_num_blocks: int | None = None, **kwargs: Any) -> Dataset:
    """Rows ``{"data": array of shape, filled with i}``."""
    return _ranges(n, _default_blocks(n, override_num_blocks), tuple(shape), "ReadRange")


def _from_blocks(name: str, tables: list[pa.Table]) -> MaterializedDataset:
    blocks = [BlockRef(nbdist.put(t), B.meta_of(t)) for t in tables]
    return MaterializedDataset(Plan(refs_source(name, blocks)), f"{name.lower()}", blocks)


def from_items(items: list[Any], *, override_num_blocks: int | None = None,
               **kwargs: Any) -> MaterializedDataset:
    """A dataset of these rows (dicts, or any values as ``{"item": value}``)."""
    items = list(items)
    n = _default_blocks(len(items), override_num_blocks) if items else 1
    cuts = [len(items) * i // n for i in builtins.range(n + 1)]
    return _from_blocks("FromItems", [B.from_rows(items[a:b]) for a, b in
                                      zip(cuts[:-1], cuts[1:], strict=False)])


def from_pandas(dfs: Any, **kwargs: Any) -> MaterializedDataset:
    dfs = dfs if isinstance(dfs, list) else [dfs]
    return _from_blocks("FromPandas", [B.from_batch(df) for df in dfs])


def from_arrow(tables: Any, **kwargs: Any) -> MaterializedDataset:
    tables = tables if isinstance(tables, list) else [tables]
    return _from_blocks("FromArrow", list(tables))


def from_numpy(ndarrays: Any) -> MaterializedDataset:
    arrays = ndarrays if isinstance(ndarrays, list) else [ndarrays]
    return _from_blocks("FromNumpy", [B.from_batch({"data": a}) for a in arrays])


def from_torch(dataset: Any, **kwargs: Any) -> MaterializedDataset:
    """A map-style torch dataset's items as rows ``{"item": dataset[i]}``."""
    return from_items([{"item": dataset[i]} for i in builtins.range(len(dataset))])


def _reads(name: str, tasks: list[ReadTask], project: bool = False) -> Dataset:
    return Dataset(Plan(reads_source(name, tasks, _io.project_reads if project else None)))


def read_parquet(paths: Any, *, filesystem: Any = None, columns: list[str] | None = None,
                 filter: Any = None, partitioning: Any = "hive", **kwargs: Any) -> Dataset:
    return _reads("ReadParquet", _io.read_tabular("parquet", paths, filesystem, columns,
                                                  filter, partitioning), project=True)


def read_csv(paths: Any, *, filesystem: Any = None, partitioning: Any = "hive",
             **kwargs: Any) -> Dataset:
    return _reads("ReadCSV", _io.read_tabular("csv", paths, filesystem,
                                              partitioning=partitioning))


def read_json(paths: Any, *, filesystem: Any = None, partitioning: Any = "hive",
              **kwargs: Any) -> Dataset:
    return _reads("ReadJSON", _io.read_tabular("json", paths, filesystem,
                                               partitioning=partitioning))


def read_text(paths: Any, *, filesystem: Any = None, encoding: str = "utf-8",
              drop_empty_lines: bool = True, include_paths: bool = False,
              **kwargs: Any) -> Dataset:
    return _reads("ReadText", _io.read_files("text", paths, filesystem, encoding=encoding,
                                             drop_empty_lines=drop_empty_lines,
                                             include_paths=include_paths))


def read_numpy(paths: Any, *, filesystem: Any = None, include_paths: bool = False,
               **kwargs: Any) -> Dataset:
    return _reads("ReadNumpy", _io.read_files("numpy", paths, filesystem, (".npy",),
                                              include_paths=include_paths))


def read_binary_files(paths: Any, *, filesystem: Any = None, include_paths: bool = False,
                      **kwargs: Any) -> Dataset:
    return _reads("ReadBinary", _io.read_files("binary", paths, filesystem,
                                               include_paths=include_paths))


def read_images(paths: Any, *, filesystem: Any = None, size: tuple[int, int] | None = None,
                mode: str | None = None, include_paths: bool = False,
                **kwargs: Any) -> Dataset:
    suffixes = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")
    return _reads("ReadImage", _io.read_files("image", paths, filesystem, suffixes,
                                              size=size, mode=mode,
                                              include_paths=include_paths))


def __getattr__(name: str) -> Any:
    if name == "preprocessors":
        return importlib.import_module(f"{__name__}.preprocessors")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AggregateFn", "BlockRef", "Count", "DataContext", "DataIterator", "Dataset",
    "ExecutionOptions", "ExecutionResources", "GroupedData", "MaterializedDataset", "Max",
    "Mean", "Min", "Std", "Sum", "from_arrow", "from_items", "from_numpy", "from_pandas",
    "from_torch", "range", "range_tensor", "read_binary_files", "read_csv", "read_images",
    "read_json", "read_numpy", "read_parquet", "read_text",
]

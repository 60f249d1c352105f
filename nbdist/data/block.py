"""Blocks: the unit of data of a dataset, a ``pyarrow.Table`` in nbdist's object store.

A block travels by ref and is read zero-copy where the store allows. This module turns what
users give and take (rows as dicts, numpy batches as dicts of arrays, pandas frames, Arrow
tables) into blocks and back, and describes a block (`BlockMeta`) so the driver can plan
without fetching it. Columns of n-dimensional numpy arrays are stored as Arrow's
fixed-shape tensor extension type and come back as numpy arrays of that shape.

Pure functions of their arguments: no processes, no state. pandas is imported only where a
pandas value is asked for, so ``import nbdist.data`` does not import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from nbdist.exceptions import NbdistError

BATCH_FORMATS = ("default", "numpy", "pandas", "pyarrow")


@dataclass(frozen=True)
class BlockMeta:
    """What the driver knows of a block without fetching it."""
    num_rows: int
    size_bytes: int
    schema: pa.Schema | None


def meta_of(block: pa.Table) -> BlockMeta:
    return BlockMeta(block.num_rows, block.nbytes, block.schema)


def _column(values: Any) -> pa.Array | pa.ChunkedArray:
    """One column of a batch as Arrow: n-d numpy arrays as fixed-shape tensors."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values
    if hasattr(values, "to_numpy") and not isinstance(values, np.ndarray):  # pandas Series
        values = values.to_numpy()
    if isinstance(values, list) and values and isinstance(values[0], np.ndarray):
        values = np.stack(values)
    arr = np.asarray(values) if not isinstance(values, np.ndarray) else values
    if arr.ndim > 1:
        dense = np.empty(arr.shape, arr.dtype)  # C order with real strides (no 0 stride)
        dense[...] = arr
        return pa.FixedShapeTensorArray.from_numpy_ndarray(dense)
    if arr.dtype == object:
        items = list(arr)
        if items and isinstance(items[0], np.ndarray):
            return _column(np.stack(items))
        return pa.array(items)
    return pa.array(arr)


def from_batch(batch: Any) -> pa.Table:
    """A block from a batch a user function returned (dict of arrays, pandas, Arrow)."""
    if isinstance(batch, pa.Table):
        return batch
    if isinstance(batch, Mapping):
        return pa.table({str(k): _column(v) for k, v in batch.items()})
    if type(batch).__name__ == "DataFrame":
        if any(str(dt) == "object" for dt in batch.dtypes):
            return pa.table({str(c): _column(batch[c].to_numpy()) for c in batch.columns})
        return pa.Table.from_pandas(batch, preserve_index=False)
    raise NbdistError(f"A batch must be a dict of arrays, a pandas DataFrame or a pyarrow "
                      f"Table; got {type(batch).__name__}. Return one of those from the "
                      f"function given to map_batches.")


def from_rows(rows: Iterable[Any]) -> pa.Table:
    """A block from rows (dicts; any other value becomes the row ``{"item": value}``)."""
    rows = [r if isinstance(r, Mapping) else {"item": r} for r in rows]
    if not rows:
        return pa.table({})
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row))
    return from_batch({k: _values([r.get(k) for r in rows]) for k in names})


def _values(items: list[Any]) -> Any:
    if items and all(isinstance(v, np.ndarray) for v in items) and \
            len({v.shape for v in items}) == 1:
        return np.stack(items)
    if items and all(isinstance(v, np.generic) for v in items):
        return np.asarray(items)
    return pa.array(items)


def _is_tensor(col: pa.ChunkedArray | pa.Array) -> bool:
    return isinstance(col.type, pa.FixedShapeTensorType)


def column_numpy(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A column as numpy (tensor columns with their shape, strings as objects)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if _is_tensor(col):
        return col.to_numpy_ndarray()
    return col.to_numpy(zero_copy_only=False)


def to_batch(block: pa.Table, batch_format: str | None) -> Any:
    """The block as the batch format a user function asked for."""
    fmt = batch_format or "default"
    if fmt in ("default", "numpy"):
        return {name: column_numpy(block.column(name)) for name in block.column_names}
    if fmt == "pyarrow":
        return block
    if fmt == "pandas":
        if any(_is_tensor(c) for c in block.columns):
            import pandas as pd

            return pd.DataFrame({n: list(column_numpy(block.column(n))) if _is_tensor(
                block.column(n)) else block.column(n).to_pandas() for n in block.column_names})
        return block.to_pandas()
    raise NbdistError(f"batch_format must be one of {BATCH_FORMATS}, not {batch_format!r}.")


def iter_rows(block: pa.Table) -> Iterator[dict[str, Any]]:
    """The block's rows as dicts (tensor cells as numpy arrays)."""
    tensors = [n for n in block.column_names if _is_tensor(block.column(n))]
    if not tensors:
        yield from block.to_pylist()
        return
    arrays = {n: column_numpy(block.column(n)) for n in tensors}
    plain = block.drop_columns(tensors).to_pylist() if len(tensors) < block.num_columns \
        else [{} for _ in range(block.num_rows)]
    for i, row in enumerate(plain):
        yield {n: (arrays[n][i] if n in arrays else row[n]) for n in block.column_names}


def concat(blocks: list[pa.Table]) -> pa.Table:
    """One block of several (schemas unified: a missing column becomes nulls)."""
    blocks = [b for b in blocks if b.num_columns or b.num_rows]
    if not blocks:
        return pa.table({})
    if len(blocks) == 1:
        return blocks[0]
    try:
        return pa.concat_tables(blocks)
    except pa.ArrowInvalid:
        return pa.concat_tables(blocks, promote_options="permissive")


def batches(block: pa.Table, batch_size: int | None) -> Iterator[pa.Table]:
    """The block cut into slices of ``batch_size`` rows (the whole block for None)."""
    if batch_size is None or block.num_rows <= batch_size:
        yield block
        return
    for start in range(0, block.num_rows, batch_size):
        yield block.slice(start, batch_size)

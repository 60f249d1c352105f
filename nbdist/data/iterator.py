"""``DataIterator``: how rows and batches leave a dataset (Ray Data's consumer API).

Shared by `Dataset` and the per-rank shards of ``streaming_split``: a subclass gives
`_block_refs` (its blocks in order, produced as they are pulled) and gets rows, batches of a
fixed size across block edges, torch batches, pandas frames. Batches are cut from a buffer of
fetched blocks; the stream of refs runs ahead of the consumer by the executor's in-flight
limit, so the next blocks are being made while a batch is used (the prefetch).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

import nbdist

from . import block as B
from .plan import BlockRef


class DataIterator:
    def _block_refs(self) -> Iterator[BlockRef]:
        raise NotImplementedError

    def _fetch_blocks(self) -> Iterator[pa.Table]:
        for b in self._block_refs():
            yield nbdist.get(b.ref)

    def iter_rows(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        for block in self._fetch_blocks():
            yield from B.iter_rows(block)

    def iter_batches(self, *, prefetch_batches: int = 1, batch_size: int | None = 256,
                     batch_format: str | None = "default", drop_last: bool = False,
                     local_shuffle_buffer_size: int | None = None,
                     local_shuffle_seed: int | None = None, **kwargs: Any) -> Iterator[Any]:
        rng = np.random.default_rng(local_shuffle_seed) if local_shuffle_buffer_size else None
        for table in self._cut(batch_size, drop_last, local_shuffle_buffer_size, rng):
            yield B.to_batch(table, batch_format)

    def _cut(self, batch_size: int | None, drop_last: bool, buffer_rows: int | None,
             rng: np.random.Generator | None = None) -> Iterator[pa.Table]:
        """Batches of ``batch_size`` rows across block edges; with a shuffle buffer, batches
        are drawn from at least ``buffer_rows`` rows permuted together."""
        buffer: list[pa.Table] = []
        rows = 0
        want = max(batch_size or 0, buffer_rows or 0)
        for block in self._fetch_blocks():
            if not block.num_rows:
                continue
            if batch_size is None:
                yield block
                continue
            buffer.append(block)
            rows += block.num_rows
            if rows < want:
                continue
            table = B.concat(buffer)
            if rng is not None:
                table = table.take(pa.array(rng.permutation(table.num_rows)))
            full = (table.num_rows // batch_size) * batch_size
            for start in range(0, full, batch_size):
                yield table.slice(start, batch_size)
            rest = table.slice(full)
            buffer, rows = ([rest], rest.num_rows) if rest.num_rows else ([], 0)
        if buffer and rows:
            table = B.concat(buffer)
            if rng is not None:
                table = table.take(pa.array(rng.permutation(table.num_rows)))
            for start in range(0, table.num_rows, batch_size or table.num_rows):
                part = table.slice(start, batch_size)
                if part.num_rows == batch_size or not drop_last:
                    yield part

    def iter_torch_batches(self, *, prefetch_batches: int = 1, batch_size: int | None = 256,
                           dtypes: Any = None, device: str = "auto",
                           collate_fn: Any = None, drop_last: bool = False,
                           local_shuffle_buffer_size: int | None = None,
                           local_shuffle_seed: int | None = None,
                           **kwargs: Any) -> Iterator[Any]:
        import torch

        dev = None if device == "auto" else device
        for batch in self.iter_batches(batch_size=batch_size, drop_last=drop_last,
                                       local_shuffle_buffer_size=local_shuffle_buffer_size,
                                       local_shuffle_seed=local_shuffle_seed):
            if collate_fn is not None:
                yield collate_fn(batch)
                continue
            out = {}
            with warnings.catch_warnings():
                # A column read zero-copy from the store is read-only; as Ray Data does, the
                # tensor shares it (no copy) and torch's warning about it is not shown.
                warnings.filterwarnings("ignore", "The given NumPy array is not writable")
                for k, v in batch.items():
                    dtype = dtypes.get(k) if isinstance(dtypes, dict) else dtypes
                    out[k] = torch.as_tensor(np.ascontiguousarray(v), dtype=dtype, device=dev)
            yield out

    def _first(self, n: int) -> DataIterator:
        limit = getattr(self, "limit", None)
        return limit(n) if limit is not None else self

    def take(self, limit: int = 20) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if limit <= 0:
            return out
        for row in self._first(limit).iter_rows():
            out.append(row)
            if len(out) >= limit:
                break
        return out

    def take_all(self, limit: int | None = None) -> list[dict[str, Any]]:
        return list(self.iter_rows())

    def take_batch(self, batch_size: int = 20, *, batch_format: str | None = "default") -> Any:
        for batch in self._first(batch_size).iter_batches(batch_size=batch_size,
                                                          batch_format=batch_format):
            return batch
        raise ValueError("The dataset is empty.")

    def show(self, limit: int = 20) -> None:
        for row in self.take(limit):
            print(row)

    def to_arrow(self) -> pa.Table:
        return B.concat(list(self._fetch_blocks()))

    def to_pandas(self, limit: int | None = None) -> Any:
        table = self.to_arrow()
        return B.to_batch(table, "pandas") if table.num_columns else \
            __import__("pandas").DataFrame()

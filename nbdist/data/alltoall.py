"""All-to-all operators: the ones that need every block of their input.

Each is a map side and a reduce side of tasks over block refs, the driver holding only refs
and small metadata:

    sort / groupby   sample the first key of each block, cut the samples into n ranges, split
                     each block by range (one task, n returns), then per range concatenate and
                     sort (sort), aggregate with Arrow's ``group_by`` (groupby), or run the
                     user's function on each group (map_groups). Equal keys meet in one range.
    random_shuffle   scatter each block's rows to n parts at random, then per part concatenate
                     and permute
    repartition      cut the rows into n equal runs by the blocks' row counts (slices, no
                     shuffle) or by a random shuffle into n parts
    zip              cut the other dataset's rows to this one's block sizes, then join columns

The functions run in tasks and are pure functions of blocks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import nbdist

from . import block as B
from .executor import ExecContext, _resolve
from .plan import BlockRef
from .stats import OpStats

Keys = list[tuple[str, str]]  # (column, "ascending" | "descending")


def _sample_keys(block: pa.Table, key: str, k: int) -> np.ndarray:
    col = B.column_numpy(pc.drop_null(block.column(key)))  # nulls are placed, not sampled
    if len(col) <= k:
        return col
    return col[np.linspace(0, len(col) - 1, k).astype(int)]


def _range_split(block: pa.Table, key: str, bounds: Any, descending: bool) -> tuple[Any, ...]:
    n = len(bounds) + 1
    column = block.column(key)
    idx = np.zeros(block.num_rows, dtype=np.int64)
    if n > 1:
        # Rows whose key is null (or NaN) go last, ascending or descending, as Ray Data and
        # Arrow's sort place them: all in the last range.
        missing = None
        if column.null_count or pa.types.is_floating(column.type):
            missing = pc.is_null(column, nan_is_null=True).to_numpy(zero_copy_only=False)
            if not missing.any():
                missing = None
        if missing is not None:
            column = pc.fill_null(column, pa.scalar(bounds[0].item() if hasattr(bounds[0], "item")
                                                    else bounds[0], column.type))
        idx = np.searchsorted(bounds, B.column_numpy(column), side="right")
        if descending:
            idx = n - 1 - idx
        if missing is not None:
            idx[missing] = n - 1
    parts = tuple(block.filter(pa.array(idx == i)) for i in range(n))
    return parts if n > 1 else parts[0]


def _sort_parts(keys: Keys, *parts: pa.Table) -> tuple[pa.Table, B.BlockMeta]:
    out = B.concat(list(parts))
    if out.num_rows:
        out = out.sort_by(keys)
    return out, B.meta_of(out)


def _boundaries(blocks: list[BlockRef], key: str, exe: ExecContext, op: str) -> Any:
    refs = [exe.remote(_sample_keys, b.ref, key, 20, op=op) for b in blocks]
    samples = [s for s in nbdist.get(refs) if len(s)]
    if not samples:
        return np.array([])
    allk = np.sort(np.concatenate(samples))
    n = len(blocks)
    return allk[[int(len(allk) * i / n) for i in range(1, n)]]


def range_partition(blocks: list[BlockRef], keys: Keys, exe: ExecContext,
                    op: str) -> list[list[Any]]:
    """Per output range, the refs of the parts of every block that fall in it."""
    key, descending = keys[0][0], keys[0][1] == "descending"
    bounds = _boundaries(blocks, key, exe, op)
    n = len(bounds) + 1
    parts = []
    for b in blocks:
        out = exe.remote(_range_split, b.ref, key, bounds, descending, op=op, num_returns=n)
        parts.append(out if n > 1 else [out])
    return [[p[i] for p in parts] for i in range(n)]


def _reduce(fn: Any, ranges: list[list[Any]], args: tuple[Any, ...], exe: ExecContext,
            op: str) -> list[BlockRef]:
    stats = OpStats(op)
    pending = [exe.block(fn, *args, *parts, op=op) for parts in ranges]
    out = [_resolve(r, m, stats) for r, m in pending]
    return [b for b in out if b.meta.num_rows]


def sort(blocks: list[BlockRef], keys: Keys, exe: ExecContext) -> list[BlockRef]:
    blocks = [b for b in blocks if b.meta.num_rows]
    if not blocks:
        return []
    return _reduce(_sort_parts, range_partition(blocks, keys, exe, "Sort"), (keys,), exe, "Sort")


def _group_starts(table: pa.Table, keys: list[str]) -> list[int]:
    """Where each group of a table sorted by ``keys`` starts, and its end."""
    cols = [table.column(k).to_pylist() for k in keys]
    starts = [0] + [i for i in range(1, table.num_rows)
                    if any(c[i] != c[i - 1] and not (c[i] is None and c[i - 1] is None)
                           for c in cols)]
    return starts + [table.num_rows]


def _custom(table: pa.Table, keys: list[str], spec: tuple[Any, ...]) -> list[Any]:
    """A custom AggregateFn over each group of ``table`` (sorted by ``keys``), in order."""
    init, accumulate_row, accumulate_block, finalize = spec
    starts = _group_starts(table, keys)
    out = []
    for s, e in zip(starts[:-1], starts[1:], strict=True):
        group = table.slice(s, e - s)
        key = tuple(group.column(k)[0].as_py() for k in keys)
        acc = init(key[0] if len(key) == 1 else key)
        if accumulate_block is not None:
            acc = accumulate_block(acc, group)
        else:
            for row in B.iter_rows(group):
                acc = accumulate_row(acc, row)
        out.append(finalize(acc) if finalize is not None else acc)
    return out


def _group_agg(keys: list[str], aggs: list[tuple[Any, ...]],
               *parts: pa.Table) -> tuple[pa.Table, B.BlockMeta]:
    table = B.concat(list(parts))
    specs: list[Any] = []
    names = list(keys)
    builtin = [a for a in aggs if a[1] != "custom"]
    for col, fn, name, *extra in builtin:
        if fn == "count":
            specs.append(([], "count_all"))
        elif fn == "std":
            specs.append((col, "stddev", pc.VarianceOptions(ddof=extra[0] if extra else 1)))
        else:
            specs.append((col, fn))
        names.append(name)
    if not table.num_rows:
        return table, B.meta_of(table)
    order = [(k, "ascending") for k in keys]
    out = table.group_by(keys, use_threads=False).aggregate(specs)
    out = out.select([c for c in out.column_names if c not in keys] + keys)
    out = out.select(keys + out.column_names[:len(builtin)]).rename_columns(names)
    out = out.sort_by(order)
    if len(builtin) < len(aggs):
        ordered = table.sort_by(order)
        results = {a[2]: _custom(ordered, keys, a[3]) for a in aggs if a[1] == "custom"}
        for name, values in results.items():
            out = out.append_column(name, B._column(values))
        out = out.select(keys + [a[2] for a in aggs])
    return out, B.meta_of(out)


def groupby_aggregate(blocks: list[BlockRef], keys: list[str],
                      aggs: list[tuple[Any, ...]], exe: ExecContext) -> list[BlockRef]:
    blocks = [b for b in blocks if b.meta.num_rows]
    if not blocks:
        return []
    ranges = range_partition(blocks, [(keys[0], "ascending")], exe, "Aggregate")
    return _reduce(_group_agg, ranges, (keys, aggs), exe, "Aggregate")


def _map_groups(keys: list[str], fn: Any, fmt: str, fn_args: tuple[Any, ...],
                *parts: pa.Table) -> tuple[pa.Table, B.BlockMeta]:
    table = B.concat(list(parts))
    if not table.num_rows:
        return table, B.meta_of(table)
    table = table.sort_by([(k, "ascending") for k in keys])
    cols = [B.column_numpy(table.column(k)) for k in keys]
    change = np.zeros(table.num_rows, dtype=bool)
    change[0] = True
    for c in cols:
        change[1:] |= c[1:] != c[:-1]
    starts = list(np.flatnonzero(change)) + [table.num_rows]
    outs = [B.from_batch(fn(B.to_batch(table.slice(s, e - s), fmt), *fn_args))
            for s, e in zip(starts[:-1], starts[1:], strict=False)]
    out = B.concat(outs)
    return out, B.meta_of(out)


def map_groups(blocks: list[BlockRef], keys: list[str], fn: Any, fmt: str,
               fn_args: tuple[Any, ...], exe: ExecContext) -> list[BlockRef]:
    blocks = [b for b in blocks if b.meta.num_rows]
    if not blocks:
        return []
    ranges = range_partition(blocks, [(keys[0], "ascending")], exe, "MapGroups")
    return _reduce(_map_groups, ranges, (keys, fn, fmt, fn_args), exe, "MapGroups")


def _scatter(block: pa.Table, n: int, seed: Any) -> tuple[Any, ...]:
    idx = np.random.default_rng(seed).integers(0, n, block.num_rows)
    parts = tuple(block.filter(pa.array(idx == i)) for i in range(n))
    return parts if n > 1 else parts[0]


def _permute(seed: Any, *parts: pa.Table) -> tuple[pa.Table, B.BlockMeta]:
    out = B.concat(list(parts))
    out = out.take(pa.array(np.random.default_rng(seed).permutation(out.num_rows)))
    return out, B.meta_of(out)


def random_shuffle(blocks: list[BlockRef], seed: int | None, exe: ExecContext,
                   n: int | None = None) -> list[BlockRef]:
    n = n or max(1, len(blocks))
    if not blocks:
        return []
    parts = []
    for i, b in enumerate(blocks):
        s = None if seed is None else [seed, i]
        out = exe.remote(_scatter, b.ref, n, s, op="RandomShuffle", num_returns=n)
        parts.append(out if n > 1 else [out])
    ranges = [[p[j] for p in parts] for j in range(n)]
    stats = OpStats("RandomShuffle")
    pending = [exe.block(_permute, None if seed is None else [seed, n + j], *r,
                         op="RandomShuffle") for j, r in enumerate(ranges)]
    return [_resolve(r, m, stats) for r, m in pending]


def _concat_slices(spec: list[tuple[int, int]], *blocks: pa.Table) -> tuple[pa.Table,
                                                                             B.BlockMeta]:
    out = B.concat([b.slice(s, n) for b, (s, n) in zip(blocks, spec, strict=False)])
    return out, B.meta_of(out)


def slice_rows(blocks: list[BlockRef], bounds: list[tuple[int, int]], exe: ExecContext,
               op: str) -> list[BlockRef]:
    """New blocks holding the global row ranges ``[lo, hi)`` of ``bounds``, by slicing."""
    starts = np.cumsum([0] + [b.meta.num_rows for b in blocks])
    stats = OpStats(op)
    pending = []
    for lo, hi in bounds:
        refs, spec = [], []
        for i, b in enumerate(blocks):
            s, e = max(lo, starts[i]), min(hi, starts[i + 1])
            if e > s:
                refs.append(b.ref)
                spec.append((int(s - starts[i]), int(e - s)))
        pending.append(exe.block(_concat_slices, spec, *refs, op=op))
    return [_resolve(r, m, stats) for r, m in pending]


def even_bounds(total: int, n: int) -> list[tuple[int, int]]:
    cuts = [total * i // n for i in range(n + 1)]
    return list(zip(cuts[:-1], cuts[1:], strict=False))


def repartition(blocks: list[BlockRef], n: int, shuffle: bool,
                exe: ExecContext) -> list[BlockRef]:
    if shuffle:
        return random_shuffle(blocks, None, exe, n)
    total = sum(b.meta.num_rows for b in blocks)
    return slice_rows(blocks, even_bounds(total, n), exe, "Repartition")


def _zip(a: pa.Table, b: pa.Table) -> tuple[pa.Table, B.BlockMeta]:
    out = a
    for name in b.column_names:
        new = name
        while new in out.column_names:
            new = f"{new}_1"
        out = out.append_column(new, b.column(name))
    return out, B.meta_of(out)


def zip_blocks(blocks: list[BlockRef], other: list[BlockRef],
               exe: ExecContext) -> list[BlockRef]:
    mine = sum(b.meta.num_rows for b in blocks)
    theirs = sum(b.meta.num_rows for b in other)
    if mine != theirs:
        from nbdist.exceptions import NbdistError

        raise NbdistError(f"zip needs datasets of the same number of rows; this one has "
                          f"{mine}, the other {theirs}. Use limit() on the longer one first.")
    cuts = np.cumsum([0] + [b.meta.num_rows for b in blocks])
    aligned = slice_rows(other, list(zip(cuts[:-1], cuts[1:], strict=False)), exe, "Zip")
    stats = OpStats("Zip")
    pending = [exe.block(_zip, a.ref, b.ref, op="Zip") for a, b in zip(blocks, aligned, strict=False)]
    return [_resolve(r, m, stats) for r, m in pending]


_STATS = ("count", "sum", "min", "max", "mean", "m2")
# What each whole-dataset aggregate needs of every block: only those kernels run.
NEEDS = {"sum": ("count", "sum"), "min": ("count", "min", "max"),
         "max": ("count", "min", "max"), "mean": ("count", "sum"),
         "std": ("count", "mean", "m2")}


def _partial(block: pa.Table, cols: list[str],
             need: tuple[str, ...] = _STATS) -> dict[str, dict[str, Any]]:
    """Per column, the statistics of ``need`` (count, sum, min, max, mean, M2 for Chan's
    parallel variance) by Arrow's kernels, nulls skipped, integer sums exact; one pass per
    kernel, so only the kernels ``need`` asks for run."""
    out: dict[str, dict[str, Any]] = {}
    for c in cols:
        if c not in block.column_names:
            continue
        col = block.column(c)
        n = col.length() - col.null_count
        if not n:
            continue
        stats: dict[str, Any] = {"count": n}
        if "sum" in need:
            stats["sum"] = pc.sum(col).as_py()
        if "min" in need or "max" in need:
            bounds = pc.min_max(col)
            stats["min"], stats["max"] = bounds["min"].as_py(), bounds["max"].as_py()
        if "mean" in need or "m2" in need:
            stats["mean"] = pc.mean(col).as_py()
        if "m2" in need:
            stats["m2"] = pc.variance(col, ddof=0).as_py() * n
        out[c] = stats
    return out


def partial_block(block: pa.Table, fn: Any, opts: dict[str, Any]) -> pa.Table:
    """The partial aggregates of a block as a one-row block (a transform fused at the end of
    the block's task, so the block itself never has to be stored)."""
    need = tuple(opts.get("need", _STATS))
    parts = _partial(block, opts["cols"], need)
    row: dict[str, list[Any]] = {}
    for c in opts["cols"]:
        stats = parts.get(c, {"count": 0})
        for stat in ("count",) + tuple(s for s in _STATS if s in need and s != "count"):
            row[f"{c}|{stat}"] = [stats.get(stat)]
    return pa.table(row)


def combine_partials(rows: list[dict[str, Any]], cols: list[str],
                     ddof: int = 1) -> dict[str, dict[str, Any]]:
    """count/sum/min/max/mean/std of numeric columns from the blocks' partials (each result
    only from the statistics the partials hold)."""
    result: dict[str, dict[str, Any]] = {}
    for c in cols:
        n, total, m2, mean = 0, 0, 0.0, 0.0
        lo: Any = None
        hi: Any = None
        for row in rows:
            nb = row[f"{c}|count"]
            if not nb:
                continue
            if f"{c}|m2" in row:
                meanb, m2b = row[f"{c}|mean"], row[f"{c}|m2"]
                delta = meanb - mean
                m2 += m2b + delta ** 2 * n * nb / (n + nb)
                mean += delta * nb / (n + nb)
            n += nb
            if f"{c}|sum" in row:
                total += row[f"{c}|sum"]
            if f"{c}|min" in row:
                lo = row[f"{c}|min"] if lo is None else min(lo, row[f"{c}|min"])
                hi = row[f"{c}|max"] if hi is None else max(hi, row[f"{c}|max"])
        if n:
            first = rows[0] if rows else {}
            result[c] = {"count": n, "sum": total, "min": lo, "max": hi,
                         "mean": mean if f"{c}|m2" in first else total / n,
                         "std": float(np.sqrt(m2 / (n - ddof))) if n > ddof else 0.0}
    return result

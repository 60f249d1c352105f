"""Row and batch transforms: what a one-to-one operator does to one block.

A `Transform` is a picklable description (its kind, the user's function and its options); a
chain of them is fused into one task per block, or run by an actor of a pool when the user's
function is a callable class (the actor builds the instance once: `instantiate`). Each kind
is a few lines over pyarrow: selection, projection, renaming and masks are Arrow kernels;
only the user's own row functions walk rows.
"""

from __future__ import annotations

import ast
import inspect
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nbdist.exceptions import NbdistError

from . import block as B


@dataclass(frozen=True)
class Transform:
    """One step of a chain: ``kind`` names the function of `_KINDS` that applies it."""
    kind: str
    fn: Any = None
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def is_class(self) -> bool:
        return inspect.isclass(self.fn)

    @property
    def label(self) -> str:
        name = getattr(self.fn, "__name__", None) if self.fn is not None else None
        titles = {"map": "Map", "map_batches": "MapBatches", "flat_map": "FlatMap",
                  "filter": "Filter", "add_column": "AddColumn", "drop": "DropColumns",
                  "select": "SelectColumns", "rename": "RenameColumns",
                  "sample": "RandomSample", "write": "Write",
                  "partial": "Aggregate"}
        title = titles.get(self.kind, self.kind)
        return f"{title}({name})" if name and self.kind not in ("write", "partial") else title


def instantiate(chain: list[Transform]) -> list[Any]:
    """The callables of a chain: a callable class built once with its constructor args."""
    out = []
    for t in chain:
        if t.is_class:
            out.append(t.fn(*t.options.get("fn_constructor_args", ()),
                            **t.options.get("fn_constructor_kwargs", {})))
        else:
            out.append(t.fn)
    return out


def apply_chain(block: pa.Table, chain: list[Transform], fns: list[Any],
                index: int = 0) -> pa.Table:
    """``index``: the block's place in its stage's output (a write names its file by it)."""
    for t, fn in zip(chain, fns, strict=False):
        opts = {**t.options, "block_index": index} if t.kind == "write" else t.options
        block = _KINDS[t.kind](block, fn, opts)
    return block


def _args(fn: Callable[..., Any], opts: dict[str, Any]) -> Callable[[Any], Any]:
    args, kwargs = opts.get("fn_args", ()), opts.get("fn_kwargs", {})
    return (lambda x: fn(x, *args, **kwargs)) if args or kwargs else fn


def _map(block: pa.Table, fn: Any, opts: dict[str, Any]) -> pa.Table:
    call = _args(fn, opts)
    return B.from_rows([call(row) for row in B.iter_rows(block)])


def _flat_map(block: pa.Table, fn: Any, opts: dict[str, Any]) -> pa.Table:
    call = _args(fn, opts)
    return B.from_rows([out for row in B.iter_rows(block) for out in call(row)])


def _map_batches(block: pa.Table, fn: Any, opts: dict[str, Any]) -> pa.Table:
    call, fmt = _args(fn, opts), opts.get("batch_format")
    outs: list[pa.Table] = []
    for part in B.batches(block, opts.get("batch_size")):
        result = call(B.to_batch(part, fmt))
        if inspect.isgenerator(result):
            outs.extend(B.from_batch(r) for r in result)
        else:
            outs.append(B.from_batch(result))
    return B.concat(outs)


def _filter(block: pa.Table, fn: Any, opts: dict[str, Any]) -> pa.Table:
    expr = opts.get("expr")
    if expr is not None:
        return block.filter(expr if isinstance(expr, pc.Expression) else parse_expr(expr))
    call = _args(fn, opts)
    mask = [bool(call(row)) for row in B.iter_rows(block)]
    return block.filter(pa.array(mask, type=pa.bool_())) if mask else block


def _add_column(block: pa.Table, fn: Any, opts: dict[str, Any]) -> pa.Table:
    col = opts["col"]
    values = B._column(fn(B.to_batch(block, opts.get("batch_format", "pandas"))))
    if col in block.column_names:
        return block.set_column(block.column_names.index(col), col, values)
    return block.append_column(col, values)


def _drop(block: pa.Table, fn: Any, opts: dict[str, Any]) -> pa.Table:
    return block.drop_columns(opts["cols"])


def _select(block: pa.Table, fn: Any, opts: dict[str, Any]) -> pa.Table:
    return block.select(opts["cols"])


def _rename(block: pa.Table, fn: Any, opts: dict[str, Any]) -> pa.Table:
    names = opts["names"]
    return block.rename_columns([names.get(n, n) for n in block.column_names])


def _sample(block: pa.Table, fn: Any, opts: dict[str, Any]) -> pa.Table:
    seed = opts.get("seed")
    rng = np.random.default_rng(None if seed is None else [seed, opts.get("salt", 0),
                                                           block.num_rows])
    return block.filter(pa.array(rng.random(block.num_rows) < opts["fraction"]))


def _write(block: pa.Table, fn: Any, opts: dict[str, Any]) -> pa.Table:
    # fn: the format's writer (nbdist.data.io.write_block), given by the dataset so that this
    # module stays below io in the import order.
    path = fn(block, opts)
    return pa.table({"path": [path], "num_rows": [block.num_rows]})


def _partial(block: pa.Table, fn: Any, opts: dict[str, Any]) -> pa.Table:
    # fn: nbdist.data.alltoall.partial_block, given by the dataset (see _write).
    return fn(block, None, opts)


_KINDS: dict[str, Callable[[pa.Table, Any, dict[str, Any]], pa.Table]] = {
    "map": _map, "flat_map": _flat_map, "map_batches": _map_batches, "filter": _filter,
    "add_column": _add_column, "drop": _drop, "select": _select, "rename": _rename,
    "sample": _sample, "write": _write, "partial": _partial,
}

_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Add: operator.add,
    ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.Mod: operator.mod,
}


def parse_expr(text: str) -> pc.Expression:
    """A filter expression such as ``"x > 3 and y == 'a'"`` as an Arrow expression (column
    names, literals, comparisons, arithmetic, and/or/not, ``in`` a list, ``is None``)."""
    try:
        return _expr(ast.parse(text, mode="eval").body)
    except (SyntaxError, KeyError, ValueError) as exc:
        raise NbdistError(f"Cannot read the filter expression {text!r} ({exc}); write it as "
                          f"a Python comparison of columns and literals, e.g. \"x > 3 and "
                          f"y == 'a'\", or pass a function.") from exc


def _expr(node: ast.AST) -> Any:
    if isinstance(node, ast.Name):
        return pc.field(node.id)
    if isinstance(node, ast.Constant):
        return pc.scalar(node.value)
    if isinstance(node, ast.BoolOp):
        parts = [_expr(v) for v in node.values]
        out = parts[0]
        for p in parts[1:]:
            out = (out & p) if isinstance(node.op, ast.And) else (out | p)
        return out
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return ~_expr(node.operand)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return pc.negate(_expr(node.operand))
    if isinstance(node, ast.BinOp):
        return _COMPARE[type(node.op)](_expr(node.left), _expr(node.right))
    if isinstance(node, ast.Compare):
        return _compare(node)
    raise ValueError(f"unsupported part {ast.dump(node)[:60]}")


def _compare(node: ast.Compare) -> Any:
    out, left = None, _expr(node.left)
    for op, comp in zip(node.ops, node.comparators, strict=False):
        if isinstance(op, (ast.In, ast.NotIn)):
            values = [e.value for e in comp.elts]  # type: ignore[attr-defined]
            part = left.isin(values)
            part = ~part if isinstance(op, ast.NotIn) else part
        elif isinstance(op, (ast.Is, ast.IsNot)):
            part = left.is_null() if isinstance(op, ast.Is) else ~left.is_null()
        else:
            right = _expr(comp)
            part = _COMPARE[type(op)](left, right)
            left = right
        out = part if out is None else out & part
    return out

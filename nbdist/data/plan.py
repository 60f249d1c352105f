"""A dataset's lazy plan: a source of blocks and the operators applied to them.

A `Plan` is immutable; each transform of a `Dataset` makes a new plan with one more operator.
Nothing runs until a consumer asks (`executor.execute`). Three kinds of operator:

    MapOp       one block in, one block out (map, map_batches, filter, columns, writes):
                a chain of `Transform`s, fused with its neighbours into one task per block,
                or run by an actor pool when its function is a callable class
    LimitOp     stops the stream after n rows
    AllToAllOp  needs every block of its input first (sort, shuffle, repartition, groupby,
                zip, randomize_block_order): a function from the input's block refs to new ones

A source yields items: `ReadTask`s (a picklable call that makes one block inside a task, so
reads run in parallel and are fused with the maps after them) or `BlockRef`s (blocks already
in the store: ``from_pandas``, a materialized dataset).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .block import BlockMeta
from .transforms import Transform

if TYPE_CHECKING:
    from .executor import ExecContext


@dataclass(frozen=True)
class ReadTask:
    """Makes one block where it is called (in a task): ``fn(*args)``."""
    fn: Callable[..., pa.Table]
    args: tuple[Any, ...] = ()
    rows: int | None = None  # when known without reading (ranges, row groups)

    def __call__(self) -> pa.Table:
        return self.fn(*self.args)


@dataclass(frozen=True)
class BlockRef:
    """A block in the object store and what is known of it."""
    ref: Any
    meta: BlockMeta


Item = ReadTask | BlockRef


@dataclass(frozen=True)
class Source:
    """Where a plan's blocks come from: ``items`` is called once per execution."""
    name: str
    items: Callable[[ExecContext], Iterator[Item]]
    num_blocks: int | None = None
    num_rows: int | None = None  # when known without executing
    # The same source reading only some columns (Parquet reads: projection pushdown), if it
    # can; None if it cannot or the columns are not all there.
    project: Callable[[list[str]], Source | None] | None = None


@dataclass(frozen=True)
class MapOp:
    chain: tuple[Transform, ...]
    compute: str = "tasks"  # or "actors"
    concurrency: int | tuple[int, ...] | None = None
    remote_args: dict[str, Any] = field(default_factory=dict)
    keeps_rows: bool = False  # the op never adds or drops rows (count stays known)

    @property
    def name(self) -> str:
        return "->".join(t.label for t in self.chain)


@dataclass(frozen=True)
class LimitOp:
    n: int

    @property
    def name(self) -> str:
        return f"Limit[{self.n}]"


@dataclass(frozen=True)
class AllToAllOp:
    name: str
    fn: Callable[[list[BlockRef], ExecContext], list[BlockRef]]
    keeps_rows: bool = False


Op = MapOp | LimitOp | AllToAllOp


@dataclass(frozen=True)
class Plan:
    source: Source
    ops: tuple[Op, ...] = ()

    def with_op(self, op: Op) -> Plan:
        return replace(self, ops=self.ops + (op,))

    @property
    def known_rows(self) -> int | None:
        """The row count when known without executing (no op changes it)."""
        if self.source.num_rows is None:
            return None
        if all(getattr(op, "keeps_rows", False) for op in self.ops):
            return self.source.num_rows
        return None

    def project(self, cols: list[str]) -> Plan:
        """This plan reading only ``cols`` when only those are used and its source can
        (a whole-dataset aggregate right after a Parquet read reads one column, not all)."""
        if self.ops or self.source.project is None:
            return self
        source = self.source.project(cols)
        return self if source is None else Plan(source)

    def describe(self) -> str:
        return " -> ".join([self.source.name] + [op.name for op in self.ops])


def refs_source(name: str, blocks: list[BlockRef]) -> Source:
    """A source of blocks already in the store."""
    return Source(name, lambda ctx: iter(blocks), len(blocks),
                  sum(b.meta.num_rows for b in blocks))


def reads_source(name: str, tasks: list[ReadTask],
                 project: Callable[[list[ReadTask], list[str]], list[ReadTask] | None]
                 | None = None) -> Source:
    """A source of read tasks (a row count only when every task knows its own);
    ``project(tasks, cols)``: the tasks reading only ``cols``, or None if they cannot."""
    rows = [t.rows for t in tasks]
    known = None if any(r is None for r in rows) else sum(r or 0 for r in rows)

    def projected(cols: list[str]) -> Source | None:
        narrow = project(tasks, cols) if project is not None else None
        return None if narrow is None else reads_source(name, narrow, project)

    return Source(name, lambda ctx: iter(tasks), len(tasks), known,
                  projected if project is not None else None)

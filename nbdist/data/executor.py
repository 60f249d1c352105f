"""The streaming executor: runs a plan as a chain of pull-driven stages.

Each physical stage is a generator over the previous one's output (`BlockRef`s in order):

    task stage   the fused chain of one-to-one transforms (and the read) as one task per block
    actor stage  the same, on a pool of actors that build the user's callable class once
    limit        passes blocks until n rows went by, slicing the last one, then stops pulling
    all-to-all   drains its input, then hands out the blocks its function made

A stage keeps at most `ExecContext.max_in_flight` blocks submitted and not yet taken
downstream, and pulls from upstream only when the consumer pulls from it: that is the
backpressure. A pipeline over more data than the object store holds keeps a few blocks per
stage in the store at any time; the consumer's first batch comes out once the first block went
through every stage, long before the last is read. Blocks leave in input order.

Every task and actor call is submitted through nbdist's public API with a library mark
(``library_call=("data", <dataset>, <operator>, role)``) so the views can fold a dataset's
thousands of block tasks into its operators. A failed block task is retried (``max_retries``);
an actor of a pool that dies is replaced and its blocks are run again. Driver-side state only:
the executor runs in the thread of whoever consumes the dataset (the driver, or a split
coordinator actor).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

import nbdist
from nbdist.events import marks
from nbdist.exceptions import ActorDiedError
from nbdist.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from . import block as B
from .context import DataContext
from .plan import AllToAllOp, BlockRef, Item, LimitOp, MapOp, Plan, ReadTask
from .stats import OpStats, Progress
from .transforms import Transform, apply_chain, instantiate

logger = logging.getLogger(__name__)
_ACTOR_RESTARTS = 3
_NO_LIMIT = 1 << 30
_names = itertools.count(1)


def _input(items: tuple[Any, ...]) -> pa.Table:
    """The block a task works on: its input block, or its bundle of blocks as one."""
    blocks = [i() if isinstance(i, ReadTask) else i for i in items]
    return blocks[0] if len(blocks) == 1 else B.concat(blocks)


def _run_block(chain: list[Transform], index: int, separate: bool,
               *items: Any) -> tuple[pa.Table, B.BlockMeta]:
    """The chain over the task's input: its items as one block (a bundle), or with
    ``separate`` over each item on its own, the outputs concatenated (several blocks'
    partial aggregates in one task: each block is seen as it is, with fewer tasks)."""
    if separate:
        fns = instantiate(chain)
        out = B.concat([apply_chain(_input((i,)), chain, fns, index) for i in items])
    else:
        out = apply_chain(_input(items), chain, instantiate(chain), index)
    return out, B.meta_of(out)


def _chunks(inputs: Iterator[Item], n: int) -> Iterator[list[Item]]:
    group: list[Item] = []
    for item in inputs:
        group.append(item)
        if len(group) == n:
            yield group
            group = []
    if group:
        yield group


def bundle_rows(chain: list[Transform]) -> int | None:
    """The rows a task of this chain should get at least: the largest ``batch_size`` of its
    ``map_batches`` (as Ray Data bundles small blocks so that batches have that size), or
    None (one block a task)."""
    sizes = [t.options.get("batch_size") or 0 for t in chain if t.kind == "map_batches"]
    return max(sizes, default=0) or None


def bundles(inputs: Iterator[Item], min_rows: int | None) -> Iterator[list[Item]]:
    """Consecutive inputs grouped until a group holds ``min_rows`` rows (inputs whose rows
    are unknown before they run, such as most reads, go alone); order is kept."""
    if min_rows is None:
        for item in inputs:
            yield [item]
        return
    group: list[Item] = []
    rows = 0
    for item in inputs:
        n = item.meta.num_rows if isinstance(item, BlockRef) else item.rows
        if n is None:
            if group:
                yield group
                group, rows = [], 0
            yield [item]
            continue
        group.append(item)
        rows += n
        if rows >= min_rows:
            yield group
            group, rows = [], 0
    if group:
        yield group


def _slice(block: pa.Table, start: int, length: int) -> tuple[pa.Table, B.BlockMeta]:
    out = block.slice(start, length)
    return out, B.meta_of(out)


class MapWorker:
    """An actor of a map pool: builds the chain's callable classes once, runs blocks."""

    def __init__(self, chain: list[Transform]) -> None:
        self.chain = chain
        self.fns = instantiate(chain)

    def run(self, index: int, *items: Any) -> tuple[pa.Table, B.BlockMeta]:
        out = apply_chain(_input(items), self.chain, self.fns, index)
        return out, B.meta_of(out)


class ExecContext:
    """One execution: its name (for marks and stats), limits, and remote calls."""

    def __init__(self, name: str, ctx: DataContext) -> None:
        self.name = name
        self.data_context = ctx
        self.max_in_flight = ctx.max_blocks_in_flight()
        self.stats: list[OpStats] = []
        self._fns: dict[tuple[Any, ...], Any] = {}
        self.nodes = _output_nodes(ctx.execution_options.locality_with_output)
        self._placed = 0

    def mark(self, op: str, role: str = "work") -> Any:
        return marks.library_call("data", self.name, op, role)

    def remote(self, fn: Callable[..., Any], *args: Any, op: str, num_returns: int = 1,
               **options: Any) -> Any:
        """``fn.remote(*args)`` as a task of operator ``op`` (retried on failure)."""
        key = (fn, num_returns, tuple(sorted(options.items())))
        rf = self._fns.get(key)
        if rf is None:
            rf = nbdist.remote(num_returns=num_returns, max_retries=3, **options)(fn)
            self._fns[key] = rf
        if self.nodes and "scheduling_strategy" not in options:
            # locality_with_output: the task runs where its output is consumed.
            node = self.nodes[self._placed % len(self.nodes)]
            self._placed += 1
            placed = self._fns.get((*key, node))
            if placed is None:
                placed = self._fns[(*key, node)] = rf.options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=True))
            rf = placed
        with self.mark(op):
            return rf.remote(*args)

    def block(self, fn: Callable[..., tuple[pa.Table, B.BlockMeta]], *args: Any,
              op: str, **options: Any) -> tuple[Any, Any]:
        """A task returning ``(block, meta)`` as two refs."""
        refs = self.remote(fn, *args, op=op, num_returns=2, **options)
        return refs[0], refs[1]


def _output_nodes(locality: bool | list[str]) -> list[str]:
    """The nodes an execution's tasks go to (``ExecutionOptions.locality_with_output``):
    none (anywhere), this process's node, or the given ones in turn."""
    if locality is True:
        return [nbdist.get_runtime_context().get_node_id()]
    if isinstance(locality, list | tuple):
        return [str(n) for n in locality]
    return []


def execute(plan: Plan, name: str | None = None,
            ctx: DataContext | None = None) -> tuple[Iterator[BlockRef], ExecContext]:
    """The plan's output blocks as a lazy iterator, and its execution's context (stats)."""
    exe = ExecContext(name or f"dataset_{next(_names)}", ctx or DataContext.get_current())
    progress = Progress(exe)
    stream: Iterator[Any] = plan.source.items(exe)
    group = _Group([plan.source.name])
    first = True  # the group still reads the source (its number of blocks is known)
    for op in plan.ops:
        if isinstance(op, MapOp) and group.takes(op):
            group.add(op)
            continue
        stream = group.flush(stream, exe, progress)
        first = False
        if isinstance(op, MapOp):
            group = _Group([], reads=False)
            group.add(op)
            continue
        stream = (limit_stage(stream, op.n, exe, progress.add(op.name))
                  if isinstance(op, LimitOp)
                  else all_to_all_stage(stream, op, exe, progress.add(op.name)))
        group = _Group([], reads=False)
    return progress.wrap(group.flush(stream, exe, progress,
                                     plan.source.num_blocks if first else None)), exe


class _Group:
    """One-to-one operators fused into one stage: plain task maps, with at most one actor
    map (or one task map with resources of its own) among them. The task maps after an
    actor map run on its actors too, so they never wait for CPUs the pool holds."""

    def __init__(self, names: list[str], reads: bool = True) -> None:
        self.names = names
        self.chain: list[Transform] = []
        self.special: MapOp | None = None
        self.reads = reads  # the stream may still hold read tasks

    def takes(self, op: MapOp) -> bool:
        plain = op.compute == "tasks" and not op.remote_args
        return plain or self.special is None

    def add(self, op: MapOp) -> None:
        if not (op.compute == "tasks" and not op.remote_args):
            self.special = op
        self.chain.extend(op.chain)
        self.names.append(op.name)

    def flush(self, stream: Iterator[Any], exe: ExecContext, progress: Progress,
              num_blocks: int | None = None) -> Iterator[Any]:
        """``num_blocks``: how many inputs the stream holds, when known (a source's)."""
        if not self.chain and not self.reads:
            return stream
        label = "->".join(n for n in self.names if n)
        if self.special is not None and self.special.compute == "actors":
            return actor_stage(stream, self.chain, self.special, label, exe, progress.add(label),
                               upstream=not self.reads)
        args = self.special.remote_args if self.special is not None else {}
        per_task = 1
        if num_blocks and self.chain and self.chain[-1].kind == "partial":
            # A whole-dataset aggregate: its output is a row per block, so the blocks are
            # dealt to as few tasks as keep every CPU busy (2 per CPU); each task costs
            # round trips between processes, which a loaded machine makes slow.
            per_task = max(1, -(-num_blocks // exe.max_in_flight))
        return task_stage(stream, self.chain, label, exe, progress.add(label), args, per_task)


def task_stage(inputs: Iterator[Item], chain: list[Transform], label: str, exe: ExecContext,
               stats: OpStats, remote_args: dict[str, Any],
               per_task: int = 1) -> Iterator[BlockRef]:
    inflight: deque[tuple[Any, Any]] = deque()
    # A chain that ends in a partial aggregate leaves one small row per block: nothing to
    # hold back, so every block's task is submitted at once (the CPUs still bound how many
    # run), and no task waits for the driver to take the one before it.
    limit = _NO_LIMIT if chain and chain[-1].kind == "partial" else exe.max_in_flight
    groups = _chunks(inputs, per_task) if per_task > 1 else bundles(inputs, bundle_rows(chain))
    for index, group in enumerate(groups):
        item = group[0]
        if not chain and isinstance(item, BlockRef):
            while inflight:
                yield _resolve(*inflight.popleft(), stats)
            stats.done(item.meta)
            yield item
            continue
        args = [i.ref if isinstance(i, BlockRef) else i for i in group]
        stats.submitted()
        inflight.append(exe.block(_run_block, chain, index, per_task > 1, *args, op=label,
                                  **remote_args))
        while len(inflight) >= limit:
            yield _resolve(*inflight.popleft(), stats)
    while inflight:
        yield _resolve(*inflight.popleft(), stats)


def _resolve(ref: Any, meta_ref: Any, stats: OpStats) -> BlockRef:
    meta = nbdist.get(meta_ref)
    stats.done(meta)
    return BlockRef(ref, meta)


def _pool_size(concurrency: Any) -> tuple[int, int]:
    """The pool's (first, most) actors: ``n`` is a fixed pool, ``(min, max)`` one that grows."""
    if concurrency is None:
        return 1, 1
    if isinstance(concurrency, int):
        return max(1, concurrency), max(1, concurrency)
    low = max(1, int(concurrency[0]))
    return low, max(low, int(concurrency[1]) if len(concurrency) > 1 else low)


def _room_for(args: dict[str, Any], spare_cpus: float) -> bool:
    """Whether the cluster has the resources of one more actor free now, and ``spare_cpus``
    besides (a pool grows only then: an actor waiting for CPUs would hold its blocks, and
    upstream tasks need CPUs that the pool must leave them)."""
    free = nbdist.available_resources()
    return all(free.get(key, 0.0) >= float(args.get(opt) or 0.0) + spare
               for key, opt, spare in (("CPU", "num_cpus", spare_cpus),
                                       ("GPU", "num_gpus", 0.0)))


def actor_stage(inputs: Iterator[Item], chain: list[Transform], op: MapOp, label: str,
                exe: ExecContext, stats: OpStats, upstream: bool = True) -> Iterator[BlockRef]:
    """``upstream``: the input comes from tasks of an earlier stage (they need a CPU that a
    growing pool must leave free), not from the pool's own fused reads."""
    args = {"num_cpus": 1, **op.remote_args}
    cls = nbdist.remote(**args)(MapWorker)
    first, most = _pool_size(op.concurrency)
    with exe.mark(label, "control"):
        actors = [cls.remote(chain) for _ in range(first)]
    per_actor = exe.data_context.max_tasks_in_flight_per_actor
    load = [0] * len(actors)
    started = [False] * len(actors)  # it returned a block: it holds its resources
    inflight: deque[list[Any]] = deque()

    def submit(group: list[Item], index: int, idx: int) -> list[Any]:
        args = [i.ref if isinstance(i, BlockRef) else i for i in group]
        with exe.mark(label):
            ref, meta = actors[idx].run.options(num_returns=2).remote(index, *args)
        load[idx] += 1
        return [group, index, idx, ref, meta, 0]

    def pop() -> BlockRef:
        entry = inflight.popleft()
        while True:
            group, index, idx, ref, meta_ref, tries = entry
            try:
                out = _resolve(ref, meta_ref, stats)
                load[idx] -= 1
                started[idx] = True
                return out
            except ActorDiedError:
                if tries >= _ACTOR_RESTARTS:
                    raise
                logger.warning("An actor of %s died; a new one runs its blocks.", label)
                with exe.mark(label, "control"):
                    actors[idx] = cls.remote(chain)
                load[idx] -= 1
                entry = submit(group, index, idx)
                entry[5] = tries + 1

    try:
        for index, group in enumerate(bundles(inputs, bundle_rows(chain))):
            while min(load) >= per_actor:
                if len(actors) < most and all(started) and \
                        _room_for(args, 1.0 if upstream else 0.0):
                    # Every actor is busy and there is more input: the pool grows by one
                    # (Ray Data's autoscaling pool, up to its max).
                    with exe.mark(label, "control"):
                        actors.append(cls.remote(chain))
                    load.append(0)
                    started.append(False)
                    break
                yield pop()
            stats.submitted()
            inflight.append(submit(group, index, load.index(min(load))))
        while inflight:
            yield pop()
    finally:
        for a in actors:
            nbdist.kill(a)


def limit_stage(inputs: Iterator[BlockRef], n: int, exe: ExecContext,
                stats: OpStats) -> Iterator[BlockRef]:
    seen = 0
    if n <= 0:
        return
    for item in inputs:
        rows = item.meta.num_rows
        if seen + rows <= n:
            seen += rows
            stats.done(item.meta)
            yield item
        else:
            ref, meta_ref = exe.block(_slice, item.ref, 0, n - seen, op=f"Limit[{n}]")
            seen = n
            yield _resolve(ref, meta_ref, stats)
        if seen >= n:
            return


def all_to_all_stage(inputs: Iterator[BlockRef], op: AllToAllOp, exe: ExecContext,
                     stats: OpStats) -> Iterator[BlockRef]:
    blocks = list(inputs)
    stats.started = time.monotonic()
    for out in op.fn(blocks, exe):
        stats.done(out.meta)
        yield out

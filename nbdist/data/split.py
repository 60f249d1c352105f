"""``streaming_split``: n shards of one streaming execution (Train's per-rank datasets).

A `SplitCoordinator` actor (no CPUs, threaded: one call per shard may wait at a time) runs
the dataset's plan with the streaming executor and deals its blocks to the shards as they ask
(`SplitIterator`, a `DataIterator` that is picklable and goes to the rank's worker). Each pass
over a shard is an epoch; an epoch's execution starts when the first shard asks for it, after
every shard finished the previous one, so all ranks see the same epochs.

``equal=True`` gives every shard the same number of rows (dropping at most the remainder, as
Ray): a pulled block goes to the shard with the fewest rows so far, and a shard is handed a
block only when every other shard has been dealt at least as many rows as it would then have;
at the end of the stream each shard's queue is cut to the smallest total. Without ``equal``
the block goes to the shard that asked (the faster rank reads more).
"""

from __future__ import annotations

import copy
import threading
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import nbdist

from . import block as B
from .context import DataContext
from .iterator import DataIterator
from .plan import BlockRef

if TYPE_CHECKING:
    from .dataset import Dataset

_WAIT_S = 0.5


class SplitCoordinator:
    def __init__(self, dataset: Dataset, n: int, equal: bool, ctx: DataContext) -> None:
        ctx.enable_progress_bars = False
        DataContext._set_current(ctx)
        self.dataset, self.n, self.equal = dataset, n, equal
        self.cond = threading.Condition()
        self.epoch = -1
        self.finished = [-1] * n  # the last epoch each shard read to its end
        self.stream: Iterator[BlockRef] | None = None
        self._reset()

    def _reset(self) -> None:
        self.queues: list[deque[BlockRef]] = [deque() for _ in range(self.n)]
        self.dealt = [0] * self.n
        self.given = [0] * self.n
        self.done = False

    def next(self, i: int, epoch: int) -> BlockRef | None:
        """Shard ``i``'s next block of ``epoch``, or None when its epoch is over."""
        with self.cond:
            while epoch > self.epoch and not all(f >= self.epoch for f in self.finished):
                self.cond.wait(_WAIT_S)
            if epoch > self.epoch:
                self.epoch = epoch
                self._reset()
                self.stream = self.dataset.iter_internal_ref_bundles()
            while True:
                block = self._ready(i)
                if block is not None:
                    self.given[i] += block.meta.num_rows
                    return block
                if self.done:
                    self.finished[i] = epoch
                    self.cond.notify_all()
                    return None
                self._pull(i)

    def _ready(self, i: int) -> BlockRef | None:
        queue = self.queues[i]
        if not queue:
            return None
        if not self.equal:
            return queue.popleft()
        if self.done:
            return queue.popleft()
        if self.given[i] + queue[0].meta.num_rows <= min(self.dealt):
            return queue.popleft()
        return None

    def _pull(self, i: int) -> None:
        assert self.stream is not None
        try:
            block = next(self.stream)
        except StopIteration:
            self.done = True
            if self.equal:
                self._rebalance()
            return
        to = self.dealt.index(min(self.dealt)) if self.equal else i
        self.queues[to].append(block)
        self.dealt[to] += block.meta.num_rows


    def _rebalance(self) -> None:
        """At the end of the stream: every shard to ``total // n`` rows, moving the excess
        rows of the shards dealt more (never given yet: see `_ready`) to those dealt less."""
        target = sum(self.dealt) // self.n
        spare: deque[BlockRef] = deque()
        for i, queue in enumerate(self.queues):
            excess = self.dealt[i] - target
            while excess > 0:
                last = queue.pop()
                if last.meta.num_rows > excess:
                    head, tail = _cut(last, last.meta.num_rows - excess)
                    queue.append(head)
                    last = tail
                spare.append(last)
                excess -= last.meta.num_rows
            self.dealt[i] = min(self.dealt[i], target)
        for i, queue in enumerate(self.queues):
            while self.dealt[i] < target:
                block = spare.popleft()
                need = target - self.dealt[i]
                if block.meta.num_rows > need:
                    block, rest = _cut(block, need)
                    spare.appendleft(rest)
                queue.append(block)
                self.dealt[i] += block.meta.num_rows


def _cut(block: BlockRef, rows: int) -> tuple[BlockRef, BlockRef]:
    """The block's first ``rows`` rows and the rest, as two new blocks."""
    table = nbdist.get(block.ref)
    head, tail = table.slice(0, rows), table.slice(rows)
    return (BlockRef(nbdist.put(head), B.meta_of(head)),
            BlockRef(nbdist.put(tail), B.meta_of(tail)))


class SplitIterator(DataIterator):
    """Shard ``index`` of a streaming split: each iteration is one epoch."""

    def __init__(self, coordinator: Any, index: int, n: int) -> None:
        self.coordinator = coordinator
        self.index = index
        self.n = n
        self.epoch = -1

    def _block_refs(self) -> Iterator[BlockRef]:
        self.epoch += 1
        while True:
            block = nbdist.get(self.coordinator.next.remote(self.index, self.epoch))
            if block is None:
                return
            yield block

    def __repr__(self) -> str:
        return f"DataIterator(shard {self.index} of {self.n})"


def streaming_split(dataset: Dataset, n: int, equal: bool, ctx: DataContext | None = None,
                    locality_hints: list[Any] | None = None) -> list[DataIterator]:
    """``ctx``: the knobs of the coordinator's executions (the current context's by default);
    ``locality_hints`` (a node id per shard): its tasks run on those nodes, as Ray Data's
    coordinator sets ``locality_with_output`` to them."""
    ctx = copy.deepcopy(ctx or DataContext.get_current())
    if locality_hints:
        ctx.execution_options.locality_with_output = [str(h) for h in locality_hints]
    cls = nbdist.remote(num_cpus=0, max_concurrency=n + 2)(SplitCoordinator)
    coordinator = cls.options(library_call=("data", dataset._name, "SplitCoordinator")).remote(
        dataset, n, equal, ctx)
    return [SplitIterator(coordinator, i, n) for i in range(n)]

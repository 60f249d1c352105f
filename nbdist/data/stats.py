"""Per-operator counters of an execution, its progress line and its events.

`OpStats` counts what an operator of the physical plan has done (blocks, rows, bytes, in
flight). `Progress` wraps the output stream of an execution: as blocks go by it redraws one
compact line per execution (``ReadRange->Map(f): 7/10 blocks 700 rows ...``, Ray Data's bars
without their clutter) and publishes a ``RunUpdate`` per operator (library "data", the
operator as the member) at most a few times a second, so the views show a dataset's run as its
operators rather than as its block tasks. ``Dataset.stats()`` renders the final counters.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import nbdist
from nbdist import events

from .block import BlockMeta

if TYPE_CHECKING:
    from .executor import ExecContext

_REDRAW_S = 0.25
# An execution shorter than this (a take, a schema, a count) only draws its progress line; a
# longer one also becomes a run in the views (one lane per operator), from then until its end.
# The driver delivers the run's first and last records itself (see `Progress.update`), so
# the rule is the same in every frontend: an execution that lasts this long shows its view
# in the cell that consumes it, however soon after that the cell ends.
VIEW_AFTER_S = 1.0


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


@dataclass
class OpStats:
    name: str
    submitted_blocks: int = 0
    blocks: int = 0
    rows: int = 0
    bytes: int = 0
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    # Called on every change (the execution's Progress: a stage that drains its input, such
    # as a sort, shows its upstream operators moving before its own first output).
    on_change: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    def submitted(self) -> None:
        self.submitted_blocks += 1
        if self.on_change is not None:
            self.on_change()

    def done(self, meta: BlockMeta) -> None:
        self.blocks += 1
        self.rows += meta.num_rows
        self.bytes += meta.size_bytes
        self.finished = time.monotonic()
        if self.on_change is not None:
            self.on_change()

    @property
    def in_flight(self) -> int:
        return max(0, self.submitted_blocks - self.blocks)

    def line(self) -> str:
        return f"{self.name}: {self.blocks} blocks {self.rows:,} rows {_size(self.bytes)}" + \
            (f" ({self.in_flight} in flight)" if self.in_flight else "")

    def summary(self) -> str:
        wall = (self.finished or time.monotonic()) - self.started
        return (f"Operator {self.name}: {self.blocks} blocks, {self.rows:,} rows, "
                f"{_size(self.bytes)} in {wall:.3f} s")


class Progress:
    def __init__(self, exe: ExecContext) -> None:
        self.exe = exe
        self.show = exe.data_context.enable_progress_bars
        self.last = 0.0
        self.began = time.monotonic()
        self.published = False
        ctx = nbdist.get_runtime_context()
        self.interactive = ctx.get_task_id() is None and ctx.get_actor_id() is None
        # The run's name in the views. In a task or an actor, the worker's id is part of it:
        # its records reach the driver (the engine relays them), and the same dataset, made
        # in the driver, may be executed in several processes, each counting from 0.
        self.run = exe.name
        if not self.interactive:
            self.run = f"{exe.name}@{ctx.get_worker_id().lstrip('0') or '0'}"

    def add(self, name: str) -> OpStats:
        stats = OpStats(name, on_change=lambda: self.update(False))
        self.exe.stats.append(stats)
        return stats

    def wrap(self, stream: Iterator[Any]) -> Iterator[Any]:
        status = "TERMINATED"
        try:
            for item in stream:
                self.update(False)
                yield item
        except BaseException:
            status = "ERROR"
            raise
        finally:
            self.update(True, status)

    def update(self, final: bool, status: str = "RUNNING") -> None:
        now = time.monotonic()
        if not final and now - self.last < _REDRAW_S:
            return
        self.last = now
        if self.published or now - self.began >= VIEW_AFTER_S:
            first = not self.published
            self.publish(status)
            if self.interactive and (first or final):
                # Delivered now, on the thread that consumes the dataset (the cell's), not
                # later by the event dispatcher: the view opens in the cell that runs the
                # execution and has its final numbers before that cell ends, in any frontend
                # (a dispatcher batch delivered after the cell ended went to no cell).
                events.bus().flush()
        if self.show and (final or self.interactive):
            line = f"{self.exe.name}: " + " | ".join(s.line() for s in self.exe.stats)
            # The driver redraws its line in place; a task or actor, whose output reaches the
            # driver line by line, prints only the final one.
            sys.stderr.write(("\r" + line + ("\n" if final else "")) if self.interactive
                             else line + "\n")
            sys.stderr.flush()

    def publish(self, status: str) -> None:
        """One ``RunUpdate`` per operator: the run is the execution, each operator a member
        (its lane), with its blocks done, rows, bytes and blocks in flight."""
        self.published = True
        for s in self.exe.stats:
            metrics = (("blocks", float(s.blocks)), ("rows", float(s.rows)),
                       ("bytes", float(s.bytes)), ("in_flight", float(s.in_flight)))
            events.publish(events.RunUpdate(time.time(), "data", run=self.run,
                                            member=s.name, status=status,
                                            iteration=s.blocks, metrics=metrics))

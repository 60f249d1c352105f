"""``DataContext``: the knobs of dataset execution users touch (Ray Data's names).

One context per process (``DataContext.get_current()``), read when an execution starts, never
at import. A split coordinator receives the driver's context with its dataset, so its
executions follow the same knobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import nbdist

MiB = 1024 * 1024


@dataclass
class ExecutionResources:
    """Limits of one execution (None: the cluster's)."""
    cpu: float | None = None
    gpu: float | None = None
    object_store_memory: float | None = None


@dataclass
class ExecutionOptions:
    """How an execution runs. ``resource_limits`` bound its blocks in flight (see
    `DataContext.max_blocks_in_flight`); ``locality_with_output``: True runs its map tasks on
    the node of the process that consumes it, a list of node ids spreads them over those
    nodes in turn (a streaming split sets the ranks' nodes); blocks always leave in input
    order, whatever ``preserve_order`` says (False allows any order, so in order is one)."""
    resource_limits: ExecutionResources = field(default_factory=ExecutionResources)
    preserve_order: bool = True
    locality_with_output: bool | list[str] = False
    verbose_progress: bool = False

    def is_resource_limits_default(self) -> bool:
        return self.resource_limits == ExecutionResources()


@dataclass
class DataContext:
    """Execution knobs: block sizes, in-flight limits, progress output."""
    target_max_block_size: int = 128 * MiB
    target_min_block_size: int = 1 * MiB
    read_op_min_num_blocks: int = 200
    max_tasks_in_flight_per_actor: int = 2
    enable_progress_bars: bool = True
    execution_options: ExecutionOptions = field(default_factory=ExecutionOptions)

    _current: ClassVar[DataContext | None] = None

    @classmethod
    def get_current(cls) -> DataContext:
        if cls._current is None:
            cls._current = DataContext()
        return cls._current

    @classmethod
    def _set_current(cls, ctx: DataContext) -> None:
        cls._current = ctx

    def max_blocks_in_flight(self) -> int:
        """Blocks a stage may have submitted and not yet handed downstream: twice the CPUs
        (so workers never idle between blocks), fewer when the object store limit says so."""
        cpus = self.execution_options.resource_limits.cpu
        if cpus is None:
            cpus = nbdist.cluster_resources().get("CPU", 1) if nbdist.is_initialized() else 1
        limit = max(2, int(cpus) * 2)
        memory = self.execution_options.resource_limits.object_store_memory
        if memory is not None:
            limit = max(1, min(limit, int(memory // max(1, self.target_max_block_size))))
        return limit

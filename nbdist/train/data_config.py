"""``DataConfig``: how a trainer hands its ``datasets`` to the ranks (Ray Train's names).

Each attempt of a run calls `DataConfig.configure` on the driver with the trainer's datasets:
a ``nbdist.data`` Dataset named in ``datasets_to_split`` becomes one
``streaming_split(world_size, equal=True)`` (a shard per rank, every rank the same number of
rows), any other Dataset is given whole to every rank (a `DataIterator` that runs its own
execution in the rank's process). Every ingest runs with the execution options of its
dataset: ``execution_options`` (one `ExecutionOptions` for all, or a dict by dataset name),
else `default_ingest_options` (the driver's ``DataContext``); with ``enable_shard_locality``
a split's tasks run on the nodes of the ranks (``locality_hints``). Values that are not
Datasets (a pandas frame, a list) are left to the worker, which takes its rank's share.
``nbdist.data`` is imported only when a Dataset is passed.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any


def _is_dataset(value: Any) -> bool:
    return type(value).__module__.startswith("nbdist.data")


class DataConfig:
    """``datasets_to_split``: ``"all"`` or a list of dataset names; ``execution_options``: an
    ``ExecutionOptions`` for every dataset, a dict of them by dataset name, or None
    (`default_ingest_options`); ``enable_shard_locality``: a split's tasks run on the
    ranks' nodes."""

    def __init__(self, datasets_to_split: str | list[str] = "all",
                 execution_options: Any = None, enable_shard_locality: bool = True) -> None:
        if not (datasets_to_split == "all" or (
                isinstance(datasets_to_split, list | tuple)
                and all(isinstance(n, str) for n in datasets_to_split))):
            raise TypeError("`datasets_to_split` should be a 'all' or a list of strings of "
                            f"dataset names. Received {type(datasets_to_split).__name__} "
                            f"with value {datasets_to_split}.")
        self._datasets_to_split = (datasets_to_split if datasets_to_split == "all"
                                   else list(datasets_to_split))
        self._execution_options = execution_options
        self._enable_shard_locality = enable_shard_locality

    def _get_execution_options(self, name: str) -> Any:
        options = self._execution_options
        if isinstance(options, dict):
            options = options.get(name)
        if options is None:
            return DataConfig.default_ingest_options()
        return copy.deepcopy(options)

    def configure(self, datasets: dict[str, Any], world_size: int,
                  worker_handles: Sequence[Any] | None = None,
                  worker_node_ids: Sequence[str] | None = None,
                  **kwargs: Any) -> list[dict[str, Any]]:
        """Each rank's datasets (a list of ``world_size`` dicts), for one attempt of a run."""
        out: list[dict[str, Any]] = [{} for _ in range(world_size)]
        split = set(datasets) if self._datasets_to_split == "all" \
            else set(self._datasets_to_split)
        for name, value in datasets.items():
            if not _is_dataset(value):
                for rank in range(world_size):
                    out[rank][name] = value
                continue
            from nbdist.data import DataContext
            from nbdist.data.dataset import DatasetIterator
            from nbdist.data.split import streaming_split

            ctx = copy.deepcopy(DataContext.get_current())
            options = self._get_execution_options(name)
            if options.is_resource_limits_default():
                options.resource_limits = copy.deepcopy(
                    ctx.execution_options.resource_limits)
            ctx.execution_options = options
            ctx.enable_progress_bars = False  # the ranks' ingest draws no lines
            if name in split:
                hints = list(worker_node_ids) if (
                    self._enable_shard_locality and worker_node_ids) else None
                shards = streaming_split(value, world_size, True, ctx, hints)
            else:
                shards = [DatasetIterator(value, ctx) for _ in range(world_size)]
            for rank in range(world_size):
                out[rank][name] = shards[rank]
        return out

    @staticmethod
    def default_ingest_options() -> Any:
        """The ``ExecutionOptions`` of an ingest when none are given: the current
        ``DataContext``'s resource limits, locality, order and verbosity."""
        from nbdist.data import DataContext, ExecutionOptions

        current = DataContext.get_current().execution_options
        return ExecutionOptions(resource_limits=copy.deepcopy(current.resource_limits),
                                preserve_order=current.preserve_order,
                                locality_with_output=copy.copy(current.locality_with_output),
                                verbose_progress=current.verbose_progress)

    def __repr__(self) -> str:
        return (f"DataConfig(datasets_to_split={self._datasets_to_split!r}, "
                f"execution_options={self._execution_options!r}, "
                f"enable_shard_locality={self._enable_shard_locality!r})")


__all__ = ["DataConfig"]

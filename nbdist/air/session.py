"""``nbdist.air.session``: Ray AIR's session functions, for code that still calls them.

Inside a training function run by a trainer they are ``nbdist.train``'s (``report``,
``get_checkpoint``, ``get_dataset_shard`` and the ranks of ``train.get_context()``); inside a
Tune trial ``report`` and ``get_checkpoint`` are ``nbdist.tune``'s. Outside both they raise the
error Train's functions raise, saying where they work.
"""

from __future__ import annotations

from typing import Any

from nbdist import train


def _in_trial() -> bool:
    # A Tune trial has a context of its own; Train's functions refuse to run there.
    try:
        train.get_context()
    except RuntimeError:
        from nbdist import tune

        try:
            tune.get_context()
        except RuntimeError:
            return False
        return True
    return False


def report(metrics: dict[str, Any], *, checkpoint: Any = None) -> None:
    """Report ``metrics`` (and a checkpoint) for this round: Train's or Tune's ``report``."""
    if _in_trial():
        from nbdist import tune

        tune.report(metrics, checkpoint=checkpoint)
        return
    train.report(metrics, checkpoint=checkpoint)


def get_checkpoint() -> Any:
    """The checkpoint to resume from (or the last reported), or None."""
    if _in_trial():
        from nbdist import tune

        return tune.get_checkpoint()
    return train.get_checkpoint()


def get_dataset_shard(dataset_name: str | None = None) -> Any:
    """This worker's shard of the trainer's dataset ``dataset_name``."""
    return train.get_dataset_shard(dataset_name)


def get_world_rank() -> int:
    return int(train.get_context().get_world_rank())


def get_world_size() -> int:
    return int(train.get_context().get_world_size())


def get_local_rank() -> int:
    return int(train.get_context().get_local_rank())


def get_local_world_size() -> int:
    return int(train.get_context().get_local_world_size())


def get_node_rank() -> int:
    return int(train.get_context().get_node_rank())


def get_experiment_name() -> str:
    return str(train.get_context().get_experiment_name())


def get_trial_name() -> str:
    return str(train.get_context().get_trial_name())


__all__ = [
    "get_checkpoint", "get_dataset_shard", "get_experiment_name", "get_local_rank",
    "get_local_world_size", "get_node_rank", "get_trial_name", "get_world_rank",
    "get_world_size", "report",
]

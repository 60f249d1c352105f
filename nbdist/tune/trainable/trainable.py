"""``tune.Trainable``: the class API (``setup``, ``step``, ``save_checkpoint``,
``load_checkpoint``, ``reset_config``, ``cleanup``), run by a trial's actor.

The actor calls ``step`` in a loop, reporting each returned dict as one iteration; a checkpoint
is saved every ``CheckpointConfig.checkpoint_frequency`` iterations, when the trial is paused,
and at the end with ``checkpoint_at_end``. ``save_checkpoint(dir)`` writes into ``dir`` (and
may return a dict, kept beside the files); ``load_checkpoint`` gets that dict back, or the
directory when ``save_checkpoint`` returned None.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

from nbdist.tune.checkpoint import Checkpoint

DICT_CHECKPOINT = "_dict_checkpoint.pkl"


class Trainable:
    """Subclass it and implement ``setup(config)`` and ``step()``; the rest is optional."""

    def __init__(self, config: dict[str, Any] | None = None, *,
                 trial_info: dict[str, Any] | None = None, **_: Any) -> None:
        self.config = dict(config or {})
        self._iteration = 0
        self._info: dict[str, Any] = {}
        self._bind(trial_info or {})
        self.setup(dict(self.config))

    def _bind(self, info: dict[str, Any]) -> None:
        self._info = dict(info)

    @property
    def iteration(self) -> int:
        return self._iteration

    training_iteration = iteration

    @property
    def trial_id(self) -> str:
        return str(self._info.get("trial_id", "default"))

    @property
    def trial_name(self) -> str:
        return str(self._info.get("trial_name", "default"))

    @property
    def logdir(self) -> str:
        return str(self._info.get("trial_dir", os.getcwd()))

    trial_dir = logdir

    def get_config(self) -> dict[str, Any]:
        return self.config

    def setup(self, config: dict[str, Any]) -> None:
        """Build the trial's state from its config (called once per configuration)."""

    def step(self) -> dict[str, Any]:
        """One iteration of training; returns its metrics (``"done": True`` ends the trial)."""
        raise NotImplementedError(f"{type(self).__name__} must implement step()")

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any] | None:
        """Write the state into ``checkpoint_dir``, or return it as a dict."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement save_checkpoint() to be checkpointed "
            "(CheckpointConfig, pausing schedulers such as HyperBand and PBT, retries)")

    def load_checkpoint(self, checkpoint: dict[str, Any] | str) -> None:
        """Restore what ``save_checkpoint`` saved."""
        raise NotImplementedError(f"{type(self).__name__} must implement load_checkpoint() "
                                  "to be restored from a checkpoint")

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        """Switch to ``new_config`` in place (for ``reuse_actors``); False: build a new one."""
        return False

    def cleanup(self) -> None:
        """Release what ``setup`` acquired."""

    @classmethod
    def default_resource_request(cls, config: dict[str, Any]) -> Any:
        return None


def load_trainable_checkpoint(instance: Trainable, checkpoint: Checkpoint) -> None:
    path = os.path.join(checkpoint.path, DICT_CHECKPOINT)
    if os.path.exists(path):
        with open(path, "rb") as f:
            instance.load_checkpoint(pickle.load(f))
    else:
        instance.load_checkpoint(checkpoint.path)

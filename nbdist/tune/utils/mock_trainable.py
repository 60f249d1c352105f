"""``MyTrainableClass``: the toy class trainable Ray Tune's examples import from
``ray.tune.utils.mock_trainable``.

Its reward is a sigmoid of the iteration, ``tanh(t / width) * height``, so ``width`` sets how
fast a trial learns and ``height`` where it ends; it checkpoints its step count as JSON. With
``mock_error`` in the config it raises from its second step on, until it has been restored
from a checkpoint (always, with ``persistent_error``); ``sleep`` makes each step that slow.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

from nbdist.tune.trainable.trainable import Trainable

MOCK_TRAINABLE_NAME = "mock_trainable"
MOCK_ERROR_KEY = "mock_error"

__all__ = ["MOCK_ERROR_KEY", "MOCK_TRAINABLE_NAME", "MyTrainableClass",
           "register_mock_trainable"]


class MyTrainableClass(Trainable):
    """A learning curve that is a random sigmoid of the iteration."""

    def setup(self, config: dict[str, Any]) -> None:
        self.timestep = 0
        self.restored = False
        self._sleep = float(config.get("sleep", 0))
        self._fail = bool(config.get(MOCK_ERROR_KEY, False))
        self._fail_always = bool(config.get("persistent_error", False))

    def step(self) -> dict[str, Any]:
        # The first step always succeeds, so a failing trial has a checkpoint to restart from.
        if self._fail and self.timestep > 0 and (self._fail_always or not self.restored):
            raise RuntimeError(f"failing on purpose at timestep {self.timestep}")
        if self._sleep > 0:
            time.sleep(self._sleep)
        self.timestep += 1
        reward = math.tanh(self.timestep / self.config.get("width", 1))
        return {"episode_reward_mean": reward * self.config.get("height", 1)}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "checkpoint"), "w") as f:
            json.dump({"timestep": self.timestep}, f)

    def load_checkpoint(self, checkpoint: Any) -> None:
        with open(os.path.join(str(checkpoint), "checkpoint")) as f:
            self.timestep = json.load(f)["timestep"]
        self.restored = True


def register_mock_trainable() -> None:
    from nbdist.tune.tuner import register_trainable

    register_trainable(MOCK_TRAINABLE_NAME, MyTrainableClass)

"""``ray.rllib.algorithms``: ``Algorithm``, ``AlgorithmConfig`` and the algorithms (PPO here;
``from nbdist.rllib.algorithms.ppo import PPOConfig``)."""

from __future__ import annotations

import importlib
from typing import Any

from nbdist.rllib.algorithms.algorithm import Algorithm
from nbdist.rllib.algorithms.algorithm_config import AlgorithmConfig, NotProvided

_WHERE = {"PPO": "nbdist.rllib.algorithms.ppo", "PPOConfig": "nbdist.rllib.algorithms.ppo",
          "DQN": "nbdist.rllib.algorithms.dqn", "DQNConfig": "nbdist.rllib.algorithms.dqn",
          "SAC": "nbdist.rllib.algorithms.sac", "SACConfig": "nbdist.rllib.algorithms.sac",
          "ES": "nbdist.rllib.algorithms.es", "ESConfig": "nbdist.rllib.algorithms.es",
          "A2C": "nbdist.rllib.algorithms.a2c", "A2CConfig": "nbdist.rllib.algorithms.a2c",
          "A3C": "nbdist.rllib.algorithms.a3c", "A3CConfig": "nbdist.rllib.algorithms.a3c"}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'nbdist.rllib.algorithms' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = ["Algorithm", "AlgorithmConfig", "NotProvided", "PPO", "PPOConfig"]

"""Algorithm names for ``tune.Tuner("PPO", ...)`` and ``get_algorithm_class``: name ->
"module:Class", imported on first use."""

from __future__ import annotations

import importlib
from typing import Any

ALGORITHMS = {
    "PPO": "nbdist.rllib.algorithms.ppo:PPO",
    "DQN": "nbdist.rllib.algorithms.dqn:DQN",
    "SAC": "nbdist.rllib.algorithms.sac:SAC",
    "ES": "nbdist.rllib.algorithms.es:ES",
    "A2C": "nbdist.rllib.algorithms.a2c:A2C",
    "A3C": "nbdist.rllib.algorithms.a3c:A3C",
}


def get_algorithm_class(name: str, return_config: bool = False) -> Any:
    """The algorithm class registered as ``name`` (None if there is none or it does not
    import); with ``return_config``, (class, its default config)."""
    where = ALGORITHMS.get(name)
    if where is None:
        return None
    module, _, attr = where.partition(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return None
    return (cls, cls.get_default_config()) if return_config else cls

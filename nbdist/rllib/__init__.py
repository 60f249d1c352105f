"""``ray.rllib`` on nbdist: RLlib's new API stack (``AlgorithmConfig`` builders,
``Algorithm.train()`` with Ray 2.60's result keys, env runners as actors, torch modules), built
on nbdist's public API and event stream only, so it runs on ``backend="ray"`` too.

    from nbdist.rllib.algorithms.ppo import PPOConfig
    algo = PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=2).build_algo()
    result = algo.train()        # result["env_runners"]["episode_return_mean"]

docs/rllib.md has the tour; algorithms/algorithm.py the design and how to write an algorithm.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "Algorithm": "nbdist.rllib.algorithms.algorithm",
    "AlgorithmConfig": "nbdist.rllib.algorithms.algorithm_config",
    "SingleAgentEpisode": "nbdist.rllib.env.single_agent_episode",
    "RLModule": "nbdist.rllib.core.rl_module",
    "RLModuleSpec": "nbdist.rllib.core.rl_module",
    "Learner": "nbdist.rllib.core.learner",
    "algorithms": "nbdist.rllib.algorithms",
    "core": "nbdist.rllib.core",
    "env": "nbdist.rllib.env",
    "utils": "nbdist.rllib.utils",
    "examples": "nbdist.rllib.examples",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'nbdist.rllib' has no attribute {name!r}")
    if module == f"nbdist.rllib.{name}":
        return importlib.import_module(module)
    return getattr(importlib.import_module(module), name)


__all__ = sorted(_WHERE)

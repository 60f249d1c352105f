"""``ray.rllib.algorithms.ppo``: ``PPO`` and ``PPOConfig``."""

from nbdist.rllib.algorithms.ppo.ppo import PPO, PPOConfig, PPOLearner

__all__ = ["PPO", "PPOConfig", "PPOLearner"]

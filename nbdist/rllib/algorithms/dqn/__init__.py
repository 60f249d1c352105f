"""``ray.rllib.algorithms.dqn``: DQN with double Q, dueling heads, n-step returns and
prioritized replay."""

from nbdist.rllib.algorithms.dqn.dqn import DQN, DQNConfig, DQNLearner
from nbdist.rllib.algorithms.dqn.dqn_rl_module import DefaultDQNTorchRLModule, DQNRLModule

__all__ = ["DQN", "DQNConfig", "DQNLearner", "DQNRLModule", "DefaultDQNTorchRLModule"]

"""``ray.rllib.algorithms.sac``: soft actor-critic for continuous (Box) actions."""

from nbdist.rllib.algorithms.sac.sac import SAC, SACConfig
from nbdist.rllib.algorithms.sac.sac_rl_module import DefaultSACTorchRLModule, SACRLModule

__all__ = ["SAC", "SACConfig", "DefaultSACTorchRLModule", "SACRLModule"]

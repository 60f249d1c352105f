"""``RLModule`` and ``RLModuleSpec`` (Ray's names), the default actor-critic MLP, and
``MultiRLModule`` / ``MultiRLModuleSpec`` (one module per policy)."""

from nbdist.rllib.core.rl_module.multi_rl_module import MultiRLModule, MultiRLModuleSpec
from nbdist.rllib.core.rl_module.rl_module import (
    ActorCriticMLPModule,
    RLModule,
    RLModuleSpec,
    TorchRLModule,
    action_distribution,
    build_mlp,
)

__all__ = ["ActorCriticMLPModule", "MultiRLModule", "MultiRLModuleSpec", "RLModule",
           "RLModuleSpec", "TorchRLModule", "action_distribution", "build_mlp"]

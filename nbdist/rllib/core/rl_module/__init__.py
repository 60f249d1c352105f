"""``RLModule`` and ``RLModuleSpec`` (Ray's names), and the default actor-critic MLP."""

from nbdist.rllib.core.rl_module.rl_module import (
    ActorCriticMLPModule,
    RLModule,
    RLModuleSpec,
    TorchRLModule,
    action_distribution,
    build_mlp,
)

__all__ = ["ActorCriticMLPModule", "RLModule", "RLModuleSpec", "TorchRLModule",
           "action_distribution", "build_mlp"]

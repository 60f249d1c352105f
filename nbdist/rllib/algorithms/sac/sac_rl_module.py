"""SAC's module for a Box action space: a tanh-squashed Gaussian policy (``pi``: the mean and
log-std of each action dimension) and twin Q-networks over (observation, action).

Actions leave the module in the env's bounds (``low + (a + 1) / 2 (high - low)``, a in
(-1, 1)) and are stored so in the episodes; the losses work on the squashed scale
(`to_unit`). The target critics live with the learner, not here: runners need only ``pi``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from nbdist.rllib.algorithms.sac.sac_losses import squashed_sample
from nbdist.rllib.core.rl_module.rl_module import RLModule, build_mlp, flat_size, is_discrete


class SACRLModule(RLModule):
    def setup(self) -> None:
        space = self.action_space
        if is_discrete(space) or not hasattr(space, "low"):
            raise ValueError(f"SAC here needs a Box action space, not {space!r}; use DQN or "
                             f"PPO for discrete actions.")
        cfg = self.model_config
        hiddens = list(cfg["fcnet_hiddens"])
        activation = cfg["fcnet_activation"]
        inputs = flat_size(self.observation_space)
        self.action_dim = int(np.prod(space.shape))
        self.pi = build_mlp(inputs, hiddens, activation, 2 * self.action_dim)
        self.qf = build_mlp(inputs + self.action_dim, hiddens, activation, 1)
        self.qf_twin = build_mlp(inputs + self.action_dim, hiddens, activation, 1)
        low = np.broadcast_to(np.asarray(space.low, np.float32), space.shape).reshape(-1)
        high = np.broadcast_to(np.asarray(space.high, np.float32), space.shape).reshape(-1)
        self.register_buffer("low", torch.as_tensor(low.copy()))
        self.register_buffer("high", torch.as_tensor(high.copy()))

    def policy(self, obs: torch.Tensor,
               deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """A squashed action in (-1, 1)^d (reparameterised) and its log-probability."""
        mean, log_std = torch.chunk(self.pi(obs), 2, dim=-1)
        return squashed_sample(mean, log_std, deterministic)

    def q(self, obs: torch.Tensor, unit_actions: torch.Tensor) -> tuple[torch.Tensor,
                                                                          torch.Tensor]:
        x = torch.cat([obs, unit_actions], dim=-1)
        return self.qf(x).squeeze(-1), self.qf_twin(x).squeeze(-1)

    def to_env(self, unit_actions: torch.Tensor) -> torch.Tensor:
        return self.low + (unit_actions + 1.0) * 0.5 * (self.high - self.low)

    def to_unit(self, env_actions: torch.Tensor) -> torch.Tensor:
        unit = 2.0 * (env_actions.reshape(len(env_actions), -1) - self.low) / (
            self.high - self.low) - 1.0
        return unit.clamp(-1.0 + 1e-6, 1.0 - 1e-6)

    def forward_inference(self, batch: dict[str, Any]) -> dict[str, Any]:
        return {"action_dist_inputs": self.pi(batch["obs"])}

    @torch.no_grad()
    def compute_actions(self, obs: Any, explore: bool = True,
                        t: int = 0) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        unit, log_prob = self.policy(self.preprocess(obs), deterministic=not explore)
        actions = self.to_env(unit).reshape((len(unit),) + tuple(self.action_space.shape))
        return actions.numpy(), {"action_logp": log_prob.numpy()}


DefaultSACTorchRLModule = SACRLModule

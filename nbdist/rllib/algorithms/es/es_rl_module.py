"""ES's module: a policy MLP only (no value function: evolution strategies never need one).
Greedy actions when not exploring (argmax, or the mean for a Box action space)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from nbdist.rllib.core.rl_module.rl_module import RLModule, build_mlp, flat_size, is_discrete


class ESRLModule(RLModule):
    def setup(self) -> None:
        cfg = self.model_config
        space = self.action_space
        outputs = int(space.n) if is_discrete(space) else 2 * int(np.prod(space.shape))
        self.pi = build_mlp(flat_size(self.observation_space), list(cfg["fcnet_hiddens"]),
                            cfg["fcnet_activation"], outputs)

    def forward_inference(self, batch: dict[str, Any]) -> dict[str, Any]:
        return {"action_dist_inputs": self.pi(batch["obs"])}

    def flat_parameters(self) -> np.ndarray:
        return torch.nn.utils.parameters_to_vector(self.parameters()).detach().numpy().copy()

    @torch.no_grad()
    def set_flat_parameters(self, theta: np.ndarray) -> None:
        torch.nn.utils.vector_to_parameters(torch.as_tensor(theta, dtype=torch.float32),
                                            self.parameters())

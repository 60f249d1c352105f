"""DQN's module: an MLP Q-network over a Discrete action space, with a dueling head (a value
stream and an advantage stream, `dueling_q`) or a plain one, and epsilon-greedy exploration.

The exploration rate is a buffer of the module (``epsilon``): the driver sets it from the
schedule at the algorithm's lifetime env steps, and it travels to the runners with the weights
(``get_state``), so every runner explores at the rate of the whole run, not of its own steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from nbdist.rllib.algorithms.dqn.dqn_losses import dueling_q
from nbdist.rllib.core.rl_module.rl_module import RLModule, build_mlp, flat_size, is_discrete


class DQNRLModule(RLModule):
    def setup(self) -> None:
        if not is_discrete(self.action_space):
            raise ValueError(f"DQN needs a Discrete action space, not {self.action_space!r}; "
                             f"use SAC for continuous actions.")
        cfg = self.model_config
        hiddens = list(cfg["fcnet_hiddens"])
        inputs = flat_size(self.observation_space)
        actions = int(self.action_space.n)
        head = list(cfg.get("head_fcnet_hiddens") or [])
        head_activation = cfg.get("head_fcnet_activation", "relu")
        self.dueling = bool(cfg.get("dueling", True))
        self.encoder = build_mlp(inputs, hiddens, cfg["fcnet_activation"])
        size = hiddens[-1] if hiddens else inputs
        self.advantages = build_mlp(size, head, head_activation, actions)
        self.value = build_mlp(size, head, head_activation, 1) if self.dueling else None
        self.register_buffer("epsilon", torch.tensor(1.0))

    def q_values(self, obs: torch.Tensor) -> torch.Tensor:
        features = self.encoder(obs)
        if self.value is None:
            return self.advantages(features)
        return dueling_q(self.value(features), self.advantages(features))

    def forward_inference(self, batch: dict[str, Any]) -> dict[str, Any]:
        q = self.q_values(batch["obs"])
        return {"action_dist_inputs": q, "qf_preds": q}

    def forward_train(self, batch: dict[str, Any]) -> dict[str, Any]:
        return {"qf_preds": self.q_values(batch["obs"])}

    @torch.no_grad()
    def compute_actions(self, obs: Any, explore: bool = True,
                        t: int = 0) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        greedy = self.q_values(self.preprocess(obs)).argmax(-1).numpy()
        if not explore:
            return greedy, {}
        epsilon = float(self.epsilon)
        random = np.random.randint(0, int(self.action_space.n), size=len(greedy))
        return np.where(np.random.random(len(greedy)) < epsilon, random, greedy), {}


DefaultDQNTorchRLModule = DQNRLModule

"""SAC (Haarnoja et al. 2018) for continuous actions, as RLlib's ``SACConfig`` names it.

It is DQN's off-policy loop (dqn.py: rounds of sampling into the replay buffer, then updates
from replayed batches, the target networks following) with SAC's update in place of the TD
step. Each update, in the driver:

    critics   the soft target r + gamma^k (1 - terminated) (min Q'(s', a') - alpha log pi(a'|s'))
              (a' drawn from the current policy, Q' the target critics), both critics
              regressed on it (twin_q; one critic otherwise)
    actor     mean(alpha log pi(a|s) - min Q(s, a)), a reparameterised
    alpha     log alpha moved so the policy's entropy tracks target_entropy ("auto": -dim(A))
    targets   Polyak-averaged with tau after every update (target_network_update_freq=0)

Three Adam optimizers (``actor_lr``, ``critic_lr``, ``alpha_lr``); the checkpoint holds them,
the target critics, alpha and the replay buffer.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch

from nbdist.rllib.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from nbdist.rllib.algorithms.dqn.dqn import DQN, DQNConfig
from nbdist.rllib.algorithms.sac.sac_losses import (
    actor_loss,
    alpha_loss,
    critic_loss,
    soft_q_target,
)
from nbdist.rllib.algorithms.sac.sac_rl_module import SACRLModule
from nbdist.rllib.core.rl_module.rl_module import RLModuleSpec


class SACConfig(DQNConfig):
    def __init__(self, algo_class: type | None = None) -> None:
        super().__init__(algo_class=algo_class or SAC)
        self.twin_q = True
        self.tau = 5e-3
        self.initial_alpha = 1.0
        self.target_entropy: Any = "auto"
        self.actor_lr = 3e-4
        self.critic_lr = 3e-4
        self.alpha_lr = 3e-4
        self.lr = None
        self.train_batch_size = 256
        self.rollout_fragment_length = 1
        self.grad_clip = None
        self.target_network_update_freq = 0
        self.num_steps_sampled_before_learning_starts = 1500
        self.replay_buffer_config = {"type": "PrioritizedEpisodeReplayBuffer",
                                     "capacity": 1_000_000, "alpha": 0.6, "beta": 0.4}
        self.model_config = {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"}

    def training(self, *, twin_q: Any = NotProvided, initial_alpha: Any = NotProvided,
                 target_entropy: Any = NotProvided, actor_lr: Any = NotProvided,
                 critic_lr: Any = NotProvided, alpha_lr: Any = NotProvided,
                 **kwargs: Any) -> AlgorithmConfig:
        self._set(twin_q=twin_q, initial_alpha=initial_alpha, target_entropy=target_entropy,
                  actor_lr=actor_lr, critic_lr=critic_lr, alpha_lr=alpha_lr)
        return super().training(**kwargs)

    def get_default_rl_module_spec(self) -> Any:
        return RLModuleSpec(module_class=SACRLModule)


class SAC(DQN):
    @classmethod
    def get_default_config(cls) -> AlgorithmConfig:
        return SACConfig()

    def setup(self, config: Any) -> None:
        super().setup(config)
        module = self.module
        entropy = self.config.target_entropy
        self.target_entropy = (-float(module.action_dim) if entropy in (None, "auto")
                               else float(entropy))
        self.log_alpha = torch.tensor(math.log(float(self.config.initial_alpha)),
                                      requires_grad=True)
        self.actor_optimizer = torch.optim.Adam(module.pi.parameters(),
                                                lr=float(self.config.actor_lr))
        critics = list(module.qf.parameters()) + list(module.qf_twin.parameters())
        self.critic_optimizer = torch.optim.Adam(critics, lr=float(self.config.critic_lr))
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=float(self.config.alpha_lr))

    def build_learner(self) -> Any:
        return None

    def before_sampling(self) -> None:
        self.sync_weights()

    def target_pairs(self) -> list[tuple[torch.nn.Module, torch.nn.Module]]:
        return [(self.target_module.qf, self.module.qf),
                (self.target_module.qf_twin, self.module.qf_twin)]

    def update_from_replay(self) -> dict[str, float]:
        module, target, twin = self.module, self.target_module, bool(self.config.twin_q)
        batch = self.replay_batch()
        alpha = self.log_alpha.detach().exp()
        with torch.no_grad():
            next_actions, next_log_prob = module.policy(batch["new_obs"])
            next_q1, next_q2 = target.q(batch["new_obs"], next_actions)
            targets = soft_q_target(batch["rewards"], batch["terminateds"], next_q1,
                                    next_q2 if twin else next_q1, next_log_prob, alpha,
                                    batch["discounts"])
        q1, q2 = module.q(batch["obs"], module.to_unit(batch["actions"].float()))
        critic, td_error = critic_loss(q1, q2 if twin else q1, targets, batch.get("weights"))
        self._step(self.critic_optimizer, critic)

        actions, log_prob = module.policy(batch["obs"])
        new_q1, new_q2 = module.q(batch["obs"], actions)
        actor = actor_loss(new_q1, new_q2 if twin else new_q1, log_prob, alpha)
        self._step(self.actor_optimizer, actor)

        temperature = alpha_loss(self.log_alpha, log_prob, self.target_entropy)
        self._step(self.alpha_optimizer, temperature)
        self._update_priorities(batch, td_error)
        return {"qf_loss": float(critic.detach()), "policy_loss": float(actor.detach()),
                "alpha_loss": float(temperature.detach()),
                "alpha_value": float(self.log_alpha.detach().exp()),
                "log_alpha_value": float(self.log_alpha.detach()),
                "qf_mean": float(q1.detach().mean()),
                "td_error_mean": float(td_error.abs().mean()),
                "entropy": float(-log_prob.detach().mean()),
                "total_loss": float((critic + actor).detach())}

    def _step(self, optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> None:
        optimizer.zero_grad()
        loss.backward()
        if self.config.grad_clip:
            params = [p for group in optimizer.param_groups for p in group["params"]]
            torch.nn.utils.clip_grad_norm_(params, float(self.config.grad_clip))
        optimizer.step()

    def get_state(self) -> dict[str, Any]:
        return {**super().get_state(), "log_alpha": float(self.log_alpha.detach()),
                "optimizers": {name: copy.deepcopy(getattr(self, name).state_dict())
                               for name in ("actor_optimizer", "critic_optimizer",
                                            "alpha_optimizer")}}

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        with torch.no_grad():
            self.log_alpha.fill_(float(state["log_alpha"]))
        for name, optimizer_state in state["optimizers"].items():
            getattr(self, name).load_state_dict(optimizer_state)


__all__ = ["SAC", "SACConfig"]

"""PPO (proximal policy optimisation) with GAE, as RLlib's ``PPOConfig`` names it.

Each iteration: the env runners sample ``train_batch_size`` env steps with the current policy;
the driver computes every observation's value (one forward pass), the advantages by GAE
(ppo_losses.compute_gae, bootstrapping cut chunks from their last observation), standardises
them, and runs ``num_epochs`` passes of minibatches of ``minibatch_size`` over the clipped
surrogate loss (ppo_losses.ppo_loss); the KL coefficient adapts to ``kl_target``; the new
weights go to the runners.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from nbdist.rllib.algorithms.algorithm import Algorithm
from nbdist.rllib.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from nbdist.rllib.algorithms.ppo.ppo_losses import compute_gae, ppo_loss
from nbdist.rllib.core import DEFAULT_MODULE_ID
from nbdist.rllib.core.learner.learner import Learner
from nbdist.rllib.core.learner.learner_group import LearnerGroup
from nbdist.rllib.core.rl_module.rl_module import action_distribution


class PPOConfig(AlgorithmConfig):
    def __init__(self, algo_class: type | None = None) -> None:
        super().__init__(algo_class=algo_class or PPO)
        # RLlib's defaults (new API stack).
        self.lr = 5e-5
        self.rollout_fragment_length = "auto"
        self.train_batch_size = 4000
        self.minibatch_size = 128
        self.num_epochs = 30
        self.use_critic = True
        self.use_gae = True
        self.lambda_ = 1.0
        self.use_kl_loss = True
        self.kl_coeff = 0.2
        self.kl_target = 0.01
        self.vf_loss_coeff = 1.0
        self.entropy_coeff = 0.0
        self.clip_param = 0.3
        self.vf_clip_param = 10.0
        self.grad_clip = None

    def training(self, *, use_critic: Any = NotProvided, use_gae: Any = NotProvided,
                 lambda_: Any = NotProvided, use_kl_loss: Any = NotProvided,
                 kl_coeff: Any = NotProvided, kl_target: Any = NotProvided,
                 vf_loss_coeff: Any = NotProvided, entropy_coeff: Any = NotProvided,
                 entropy_coeff_schedule: Any = NotProvided, clip_param: Any = NotProvided,
                 vf_clip_param: Any = NotProvided, **kwargs: Any) -> PPOConfig:
        if "lambda" in kwargs:
            lambda_ = kwargs.pop("lambda")
        super().training(**kwargs)
        self._set(use_critic=use_critic, use_gae=use_gae, lambda_=lambda_,
                  use_kl_loss=use_kl_loss, kl_coeff=kl_coeff, kl_target=kl_target,
                  vf_loss_coeff=vf_loss_coeff, entropy_coeff=entropy_coeff,
                  clip_param=clip_param, vf_clip_param=vf_clip_param)
        return self

    def validate(self) -> None:
        super().validate()
        if self.minibatch_size is not None and \
                int(self.minibatch_size) > self.total_train_batch_size:
            raise ValueError(f"minibatch_size ({self.minibatch_size}) must be <= "
                             f"train_batch_size ({self.total_train_batch_size})")


class PPOLearner(Learner):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.curr_kl_coeff = float(self.config.kl_coeff)

    def compute_loss_for_module(self, module_id: str, config: Any, batch: dict[str, Any],
                                fwd_out: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        space = self.module.action_space
        dist = action_distribution(space, fwd_out["action_dist_inputs"])
        old = action_distribution(space, batch["action_dist_inputs"])
        logp = dist.log_prob(batch["actions"])
        kl = torch.distributions.kl_divergence(old, dist) if config.use_kl_loss else None
        vf_preds = fwd_out["vf_preds"] if config.use_critic else torch.zeros_like(logp)
        total, stats = ppo_loss(
            logp=logp, old_logp=batch["action_logp"], advantages=batch["advantages"],
            vf_preds=vf_preds, value_targets=batch["value_targets"], entropy=dist.entropy(),
            kl=kl, clip_param=config.clip_param, vf_clip_param=config.vf_clip_param,
            vf_loss_coeff=config.vf_loss_coeff if config.use_critic else 0.0,
            entropy_coeff=config.entropy_coeff, kl_coeff=self.curr_kl_coeff)
        return total, stats

    def after_gradient_based_update(self, stats: dict[str, float]) -> dict[str, float]:
        if self.config.use_kl_loss:
            kl, target = stats.get("mean_kl_loss", 0.0), float(self.config.kl_target)
            if kl > 2.0 * target:
                self.curr_kl_coeff *= 1.5
            elif kl < 0.5 * target:
                self.curr_kl_coeff *= 0.5
        stats["curr_kl_coeff"] = self.curr_kl_coeff
        return stats

    def get_state(self) -> dict[str, Any]:
        return {**super().get_state(), "curr_kl_coeff": self.curr_kl_coeff}

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        self.curr_kl_coeff = float(state.get("curr_kl_coeff", self.curr_kl_coeff))


def build_ppo_batch(module: Any, episodes: list[Any], *, gamma: float, lambda_: float,
                    use_gae: bool = True) -> dict[str, torch.Tensor]:
    """The training batch of a list of episode chunks: observations, actions, their
    log-probabilities and distribution inputs at sampling time, advantages (standardised) and
    value targets."""
    episodes = [e for e in episodes if len(e)]
    all_obs = np.concatenate([np.asarray(e.observations) for e in episodes])
    with torch.no_grad():
        out = module.forward_train({"obs": module.preprocess(all_obs)})
        values = out["vf_preds"].numpy()
        dist_inputs = out["action_dist_inputs"]
    advantages, targets, rows = [], [], []
    start = 0
    for episode in episodes:
        n = len(episode)
        v = values[start:start + n + 1]
        if use_gae:
            adv, tgt = compute_gae(episode.rewards, v, terminated=episode.is_terminated,
                                   gamma=gamma, lambda_=lambda_)
        else:  # plain discounted returns minus the baseline
            adv, tgt = compute_gae(episode.rewards, v, terminated=episode.is_terminated,
                                   gamma=gamma, lambda_=1.0)
        advantages.append(adv)
        targets.append(tgt)
        rows.append(np.arange(start, start + n))
        start += n + 1
    index = np.concatenate(rows)
    adv_all = np.concatenate(advantages)
    adv_all = (adv_all - adv_all.mean()) / max(1e-4, float(adv_all.std()))
    actions = np.concatenate([np.asarray(e.actions) for e in episodes])
    logp = np.concatenate([np.asarray(e.extra_model_outputs["action_logp"], dtype=np.float32)
                           for e in episodes])
    return {"obs": module.preprocess(all_obs[index]),
            "actions": torch.as_tensor(actions),
            "action_logp": torch.as_tensor(logp),
            "action_dist_inputs": dist_inputs[torch.as_tensor(index)],
            "advantages": torch.as_tensor(adv_all, dtype=torch.float32),
            "value_targets": torch.as_tensor(np.concatenate(targets))}


class PPO(Algorithm):
    @classmethod
    def get_default_config(cls) -> PPOConfig:
        return PPOConfig(algo_class=cls)

    supports_multi_agent = True

    def build_learner(self) -> Any:
        learner_class = self.config.learner_class or PPOLearner
        return LearnerGroup(config=self.config, module=self.module,
                            learner_class=learner_class, module_spec=self.module_spec,
                            run_name=self.run_name)

    def training_step(self) -> dict[str, Any]:
        config = self.config
        episodes = self.sample_episodes(num_env_steps=config.total_train_batch_size)
        if self.is_multi_agent:  # each module trains on its own agents' trajectories
            by_module: dict[str, list[Any]] = {}
            for episode in episodes:
                for mid, agent_episodes in episode.get_agent_episodes_by_module().items():
                    by_module.setdefault(mid, []).extend(agent_episodes)
        else:
            by_module = {DEFAULT_MODULE_ID: episodes}
        batches = {mid: build_ppo_batch(self.get_module(mid), eps, gamma=config.gamma,
                                        lambda_=config.lambda_, use_gae=config.use_gae)
                   for mid, eps in by_module.items()
                   if self.is_trainable(mid) and any(len(e) for e in eps)}
        stats = self.learner.update(batches, minibatch_size=config.minibatch_size,
                                    num_epochs=config.num_epochs,
                                    shuffle=config.shuffle_batch_per_epoch)
        self.sync_weights()
        return {**stats, "num_env_steps_trained": sum(len(e) for e in episodes)}

"""A2C and A3C (Mnih et al. 2016), the actor-critic pair the course teaches and RLlib dropped.

A2C, synchronous: every runner samples ``rollout_fragment_length`` steps per env with the same
weights; the driver turns each episode chunk into bootstrapped discounted returns
(`discounted_returns`: V of the chunk's last observation stands in for the rest of a cut or
truncated episode), takes one gradient step of `a2c_loss` on the whole batch, and sends the new
weights.

A3C, asynchronous: each runner actor samples on its own; whenever one hands in a fragment the
driver takes a gradient step on it at once and sends that runner the newest weights, while the
others keep sampling with the weights they had (the policy lag A3C accepts). ``train()`` ends
after ``train_batch_size`` env steps have been applied. A runner that dies is replaced (within
``max_num_env_runner_restarts``) and goes on sampling. With ``num_env_runners=0`` A3C is A2C.
The gradient is computed in the driver, where the only copy of the optimizer lives.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

import nbdist
from nbdist.rllib.algorithms.a2c.a2c_losses import a2c_loss, discounted_returns
from nbdist.rllib.algorithms.algorithm import Algorithm
from nbdist.rllib.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from nbdist.rllib.core import DEFAULT_MODULE_ID
from nbdist.rllib.core.learner.learner import Learner
from nbdist.rllib.core.rl_module.rl_module import action_distribution
from nbdist.rllib.env.env_runner_group import WAIT_S
from nbdist.rllib.env.single_agent_episode import SingleAgentEpisode

# What a runner's death looks like to the caller (an error the env raised is not one).
_RUNNER_DEATHS = (nbdist.exceptions.ActorError, nbdist.exceptions.WorkerCrashedError,
                  nbdist.exceptions.ObjectLostError)


class A2CConfig(AlgorithmConfig):
    def __init__(self, algo_class: type | None = None) -> None:
        super().__init__(algo_class=algo_class or A2C)
        self.lr = 1e-3
        self.rollout_fragment_length = "auto"
        self.train_batch_size = 500
        self.grad_clip = 40.0
        self.vf_loss_coeff = 0.5
        self.entropy_coeff = 0.01

    def training(self, *, vf_loss_coeff: Any = NotProvided, entropy_coeff: Any = NotProvided,
                 **kwargs: Any) -> AlgorithmConfig:
        self._set(vf_loss_coeff=vf_loss_coeff, entropy_coeff=entropy_coeff)
        return super().training(**kwargs)


class A3CConfig(A2CConfig):
    def __init__(self, algo_class: type | None = None) -> None:
        super().__init__(algo_class=algo_class or A3C)
        self.rollout_fragment_length = 50
        self.num_env_runners = 2


class A2CLearner(Learner):
    def compute_loss_for_module(self, module_id: str, config: Any, batch: dict[str, Any],
                                fwd_out: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        dist = action_distribution(self.module.action_space, fwd_out["action_dist_inputs"])
        actions = batch["actions"]
        total, parts = a2c_loss(dist.log_prob(actions), fwd_out["vf_preds"], batch["returns"],
                                dist.entropy(), float(config.vf_loss_coeff),
                                float(config.entropy_coeff))
        return total, {"total_loss": float(total.detach()),
                       **{k: float(v) for k, v in parts.items()}}


class A2C(Algorithm):
    @classmethod
    def get_default_config(cls) -> AlgorithmConfig:
        return A2CConfig()

    def build_learner(self) -> Any:
        return A2CLearner(config=self.config, module=self.module)

    def training_step(self) -> dict[str, Any]:
        episodes = self.sample_episodes(num_env_steps=int(self.config.train_batch_size))
        stats = self.learn_on_episodes(episodes)
        self.sync_weights()
        return {DEFAULT_MODULE_ID: stats, "num_env_steps_trained": int(stats.pop("steps"))}

    def learn_on_episodes(self, episodes: list[SingleAgentEpisode]) -> dict[str, float]:
        """One gradient step on the episodes' steps; the learner's stats and ``steps``."""
        batch = self.build_batch([e for e in episodes if len(e)])
        stats = self.learner.update(batch, num_epochs=1, shuffle=False)
        stats["steps"] = float(len(batch["returns"]))
        return stats

    def build_batch(self, episodes: list[SingleAgentEpisode]) -> dict[str, torch.Tensor]:
        module = self.module
        last_obs = module.preprocess(np.stack([np.asarray(e.observations[-1])
                                               for e in episodes]))
        with torch.no_grad():
            bootstrap = module.compute_values({"obs": last_obs})
        obs, actions, returns = [], [], []
        for episode, value in zip(episodes, bootstrap, strict=True):
            length = len(episode)
            done = np.zeros(length, dtype=bool)
            terminated, truncated = done.copy(), done.copy()
            terminated[-1], truncated[-1] = episode.is_terminated, episode.is_truncated
            values_next = torch.zeros(length)
            values_next[-1] = value
            returns.append(discounted_returns(
                torch.as_tensor(episode.rewards, dtype=torch.float32),
                torch.as_tensor(terminated), torch.as_tensor(truncated), values_next,
                float(self.config.gamma)))
            obs.append(np.asarray(episode.observations[:-1]))
            actions.append(np.asarray(episode.actions))
        return {"obs": module.preprocess(np.concatenate(obs)),
                "actions": torch.as_tensor(np.concatenate(actions)),
                "returns": torch.cat(returns)}


class A3C(A2C):
    @classmethod
    def get_default_config(cls) -> AlgorithmConfig:
        return A3CConfig()

    def training_step(self) -> dict[str, Any]:
        group = self.env_runner_group
        if not group.actors:
            return super().training_step()
        config = self.config
        fragment = int(config.get_rollout_fragment_length()) * int(
            config.num_envs_per_env_runner)
        pending = getattr(self, "_pending", None) or {}
        for index, actor in enumerate(group.actors, start=1):
            if index not in pending.values():
                pending[self._submit(actor, index, fragment)] = index
        applied = 0
        sums: dict[str, float] = {}
        updates = 0
        while applied < int(config.train_batch_size):
            # In short steps (WAIT_S): a notebook shows the run's view, not a progress bar.
            ready, _ = nbdist.wait(list(pending), num_returns=1, timeout=WAIT_S)
            if not ready:
                continue
            index = pending.pop(ready[0])
            try:
                result = nbdist.get(ready[0])
            except _RUNNER_DEATHS as error:
                actor = group.replace_env_runner(index, error)
                pending[self._submit(actor, index, fragment)] = index
                continue
            self.record_episodes(result["episode_returns"], result["episode_lens"],
                                 result["num_env_steps"])
            stats = self.learn_on_episodes(result["episodes"])
            applied += int(stats.pop("steps"))
            for key, value in stats.items():
                sums[key] = sums.get(key, 0.0) + value
            updates += 1
            self._weights_ref = nbdist.put(self.module.get_state())
            pending[self._submit(group.actors[index - 1], index, fragment)] = index
        # The fragments in flight carry on into the next iteration.
        self._pending = pending
        stats = {k: v / updates for k, v in sums.items()}
        stats["num_async_updates"] = float(updates)
        return {DEFAULT_MODULE_ID: stats, "num_env_steps_trained": applied}

    def _submit(self, actor: Any, index: int, steps: int) -> Any:
        weights = getattr(self, "_weights_ref", None)
        if weights is None:
            weights = self._weights_ref = nbdist.put(self.module.get_state())
        mark = ("rllib", self.run_name, f"env_runner {index}", "work")
        return actor.sample.options(library_call=mark).remote(weights, num_timesteps=steps)

    def stop(self) -> None:
        self._pending = {}
        super().stop()

"""DQN (Mnih et al. 2015) with double Q, a dueling head, n-step returns and prioritized replay,
as RLlib's ``DQNConfig`` names them; also the off-policy loop SAC reuses.

One ``train()`` is rounds of::

    driver                                               env runners (actors, or the driver's)
      epsilon <- schedule(lifetime env steps)  ─ weights ─> sample rollout_fragment_length
      replay buffer <- n-step transitions      <─ episode chunks ─   steps per env
      once the buffer holds num_steps_sampled_before_learning_starts steps:
        updates (one per round, or training_intensity's share): a batch drawn from the buffer,
        TD targets from the target network (the online one picks the action with double_q),
        a gradient step, priorities updated with the new TD errors;
        the target network follows (copied, or Polyak-averaged with tau) every
        target_network_update_freq env steps sampled (0: after every update)

until the iteration has sampled ``min_sample_timesteps_per_iteration`` env steps. The replay
buffer and the target network stay in the driver; checkpoints hold both.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import torch

from nbdist.rllib.algorithms.algorithm import Algorithm
from nbdist.rllib.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from nbdist.rllib.algorithms.dqn.dqn_losses import (
    piecewise_schedule,
    polyak_update,
    td_loss,
    td_targets,
)
from nbdist.rllib.algorithms.dqn.dqn_rl_module import DQNRLModule
from nbdist.rllib.core import DEFAULT_MODULE_ID
from nbdist.rllib.core.learner.learner import Learner
from nbdist.rllib.core.rl_module.rl_module import RLModuleSpec
from nbdist.rllib.env.single_agent_episode import SingleAgentEpisode
from nbdist.rllib.utils.replay_buffers import PrioritizedReplayBuffer, make_replay_buffer
from nbdist.rllib.utils.replay_buffers.n_step import n_step_transitions

Batch = dict[str, np.ndarray]


class DQNConfig(AlgorithmConfig):
    def __init__(self, algo_class: type | None = None) -> None:
        super().__init__(algo_class=algo_class or DQN)
        self.lr = 5e-4
        self.train_batch_size = 32
        self.rollout_fragment_length = 4
        self.grad_clip = 40.0
        self.double_q = True
        self.dueling = True
        self.n_step: int = 1
        self.target_network_update_freq = 500
        self.tau = 1.0
        self.num_steps_sampled_before_learning_starts = 1000
        self.replay_buffer_config: dict[str, Any] = {
            "type": "PrioritizedEpisodeReplayBuffer", "capacity": 50_000, "alpha": 0.6,
            "beta": 0.4}
        self.epsilon: Any = [(0, 1.0), (10_000, 0.05)]
        self.td_error_loss_fn = "huber"
        self.training_intensity: float | None = None
        self.min_sample_timesteps_per_iteration = 1000

    def training(self, *, double_q: Any = NotProvided, dueling: Any = NotProvided,
                 n_step: Any = NotProvided, target_network_update_freq: Any = NotProvided,
                 tau: Any = NotProvided,
                 num_steps_sampled_before_learning_starts: Any = NotProvided,
                 replay_buffer_config: Any = NotProvided, epsilon: Any = NotProvided,
                 td_error_loss_fn: Any = NotProvided, training_intensity: Any = NotProvided,
                 **kwargs: Any) -> AlgorithmConfig:
        if replay_buffer_config is not NotProvided:
            replay_buffer_config = {**self.replay_buffer_config, **replay_buffer_config}
        self._set(double_q=double_q, dueling=dueling, n_step=n_step,
                  target_network_update_freq=target_network_update_freq, tau=tau,
                  num_steps_sampled_before_learning_starts=(
                      num_steps_sampled_before_learning_starts),
                  replay_buffer_config=replay_buffer_config, epsilon=epsilon,
                  td_error_loss_fn=td_error_loss_fn, training_intensity=training_intensity)
        return super().training(**kwargs)

    def reporting(self, *, min_sample_timesteps_per_iteration: Any = NotProvided,
                  **kwargs: Any) -> AlgorithmConfig:
        self._set(min_sample_timesteps_per_iteration=min_sample_timesteps_per_iteration)
        return super().reporting(**kwargs)

    def get_default_rl_module_spec(self) -> Any:
        return RLModuleSpec(module_class=DQNRLModule, model_config={"dueling": self.dueling})

    def validate(self) -> None:
        super().validate()
        if int(self.n_step) < 1:
            raise ValueError(f"n_step must be at least 1, not {self.n_step}")
        if not 0 < float(self.tau) <= 1:
            raise ValueError(f"tau must be in (0, 1], not {self.tau}")


class DQNLearner(Learner):
    """The TD loss on a batch whose targets the algorithm computed (``td_targets``); keeps the
    batch's TD errors for the replay priorities."""

    td_error: torch.Tensor | None = None

    def compute_loss_for_module(self, module_id: str, config: Any, batch: dict[str, Any],
                                fwd_out: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        q = fwd_out["qf_preds"]
        q_taken = q.gather(-1, batch["actions"].long().unsqueeze(-1)).squeeze(-1)
        loss, self.td_error = td_loss(q_taken, batch["td_targets"], batch.get("weights"),
                                      config.td_error_loss_fn)
        value = float(loss.detach())
        return loss, {"total_loss": value, "qf_loss": value,
                      "qf_mean": float(q_taken.detach().mean()),
                      "td_error_mean": float(self.td_error.abs().mean())}


def episode_steps(episode: SingleAgentEpisode) -> Batch:
    """An episode chunk as arrays of its steps (see replay_buffers/n_step.py)."""
    length = len(episode)
    ends = np.zeros(length, dtype=bool)
    terminateds, truncateds = ends.copy(), ends.copy()
    if length:
        terminateds[-1], truncateds[-1] = episode.is_terminated, episode.is_truncated
    observations = np.asarray(episode.observations)
    return {"obs": observations[:-1], "actions": np.asarray(episode.actions),
            "rewards": np.asarray(episode.rewards, dtype=np.float32),
            "new_obs": observations[1:], "terminateds": terminateds, "truncateds": truncateds}


class DQN(Algorithm):
    @classmethod
    def get_default_config(cls) -> AlgorithmConfig:
        return DQNConfig()

    def setup(self, config: Any) -> None:
        super().setup(config)
        self.target_module = copy.deepcopy(self.module)
        self.target_module.requires_grad_(False)
        self.replay_buffer = make_replay_buffer(dict(self.config.replay_buffer_config),
                                                seed=self.config.seed)
        self._target_updated_at = 0

    def build_learner(self) -> Any:
        return DQNLearner(config=self.config, module=self.module)

    # --- one iteration --------------------------------------------------------------------
    def training_step(self) -> dict[str, Any]:
        config = self.config
        wanted = max(1, int(config.min_sample_timesteps_per_iteration or 1))
        sampled = trained = 0
        sums: dict[str, float] = {}
        updates = 0
        while sampled < wanted:
            self.before_sampling()
            episodes = self.sample_episodes(num_env_steps=self._round_steps())
            steps = sum(len(e) for e in episodes)
            sampled += steps
            for episode in episodes:
                if len(episode):
                    self.replay_buffer.add(n_step_transitions(
                        episode_steps(episode), int(config.n_step), float(config.gamma)))
            lifetime = self.counters["num_env_steps_sampled_lifetime"]
            if lifetime < int(config.num_steps_sampled_before_learning_starts):
                continue
            for _ in range(self._num_updates(steps)):
                stats = self.update_from_replay()
                for key, value in stats.items():
                    sums[key] = sums.get(key, 0.0) + value
                updates += 1
                trained += int(config.train_batch_size)
                self.update_target_networks(lifetime)
        stats = {k: v / updates for k, v in sums.items()} if updates else {}
        stats["num_updates"] = float(updates)
        self.extra_results["replay_buffer"] = {"size": len(self.replay_buffer),
                                               "num_added": self.replay_buffer.num_added}
        return {DEFAULT_MODULE_ID: stats, "num_env_steps_trained": trained}

    def before_sampling(self) -> None:
        """Set the exploration rate for the lifetime steps and send the weights."""
        epsilon = piecewise_schedule(self.config.epsilon,
                                     self.counters["num_env_steps_sampled_lifetime"])
        self.module.epsilon.fill_(epsilon)
        self.extra_results["epsilon"] = epsilon
        self.sync_weights()

    def _round_steps(self) -> int:
        config = self.config
        return (int(config.get_rollout_fragment_length()) * int(config.num_envs_per_env_runner)
                * max(1, int(config.num_env_runners)))

    def _num_updates(self, steps: int) -> int:
        intensity = self.config.training_intensity
        if intensity is None:
            return 1
        # training_intensity: replayed rows per sampled env step.
        exact = steps * float(intensity) / int(self.config.train_batch_size)
        whole = math.floor(exact)
        return whole + int(np.random.random() < exact - whole)

    def replay_batch(self) -> dict[str, torch.Tensor]:
        """A batch drawn from the buffer, as tensors (``batch_indexes`` kept as numpy)."""
        batch = self.replay_buffer.sample(int(self.config.train_batch_size))
        out: dict[str, Any] = {
            "obs": self.module.preprocess(batch["obs"]),
            "new_obs": self.module.preprocess(batch["new_obs"]),
            "actions": torch.as_tensor(batch["actions"]),
            "rewards": torch.as_tensor(batch["rewards"], dtype=torch.float32),
            "terminateds": torch.as_tensor(batch["terminateds"]),
            "discounts": torch.as_tensor(batch["discounts"], dtype=torch.float32)}
        if "weights" in batch:
            out["weights"] = torch.as_tensor(batch["weights"])
            out["batch_indexes"] = batch["batch_indexes"]
        return out

    def update_from_replay(self) -> dict[str, float]:
        """One gradient step on a replayed batch; the batch's priorities updated."""
        batch = self.replay_batch()
        with torch.no_grad():
            online = self.module.q_values(batch["new_obs"]) if self.config.double_q else None
            targets = td_targets(batch["rewards"], batch["discounts"], batch["terminateds"],
                                 self.target_module.q_values(batch["new_obs"]), online)
        train_batch = {"obs": batch["obs"], "actions": batch["actions"], "td_targets": targets}
        if "weights" in batch:
            train_batch["weights"] = batch["weights"]
        stats = self.learner.update(train_batch, num_epochs=1, shuffle=False)
        self._update_priorities(batch, self.learner.td_error)
        return stats

    def _update_priorities(self, batch: dict[str, Any], td_error: Any) -> None:
        if isinstance(self.replay_buffer, PrioritizedReplayBuffer) and td_error is not None:
            self.replay_buffer.update_priorities(batch["batch_indexes"], td_error.numpy())

    def target_pairs(self) -> list[tuple[torch.nn.Module, torch.nn.Module]]:
        """(target, online) networks the target update moves."""
        return [(self.target_module, self.module)]

    def update_target_networks(self, lifetime: int) -> None:
        every = int(self.config.target_network_update_freq)
        if every and lifetime - self._target_updated_at < every:
            return
        for target, online in self.target_pairs():
            polyak_update(target, online, float(self.config.tau))
        self._target_updated_at = lifetime
        self.extra_results["last_target_update_ts"] = lifetime

    # --- state ----------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        return {**super().get_state(), "target_module": self.target_module.get_state(),
                "replay_buffer": self.replay_buffer.get_state(),
                "target_updated_at": self._target_updated_at}

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        self.target_module.set_state(state["target_module"])
        self.replay_buffer.set_state(state["replay_buffer"])
        self._target_updated_at = int(state["target_updated_at"])

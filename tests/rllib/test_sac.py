"""SAC runs an iteration on Pendulum with a real env-runner actor: replayed updates of the
critics, the actor and alpha, actions within the env's bounds, Ray's result keys."""

from __future__ import annotations

import numpy as np
import pytest

from nbdist.rllib.algorithms.sac import SACConfig

pytestmark = pytest.mark.usefixtures("cluster")


def test_sac_runs_an_iteration_on_pendulum() -> None:
    config = (SACConfig().environment("Pendulum-v1")
              .env_runners(num_env_runners=1, rollout_fragment_length=50)
              .training(train_batch_size=32, num_steps_sampled_before_learning_starts=100)
              .reporting(min_sample_timesteps_per_iteration=200)
              .rl_module(model_config={"fcnet_hiddens": [16], "fcnet_activation": "relu"})
              .debugging(seed=1))
    algo = config.build_algo()
    try:
        alpha_before = float(algo.log_alpha.detach())
        result = algo.train()
        runners = result["env_runners"]
        assert runners["num_env_steps_sampled_lifetime"] == 200
        assert runners["num_episodes"] == 1 and runners["episode_len_mean"] == 200
        assert np.isfinite(runners["episode_return_mean"])
        learner = result["learners"]["default_policy"]
        assert learner["num_updates"] == 3  # one per round once 100 steps are in the buffer
        for key in ("qf_loss", "policy_loss", "alpha_loss", "alpha_value", "entropy"):
            assert np.isfinite(learner[key]), key
        assert float(algo.log_alpha.detach()) != alpha_before
        assert result["learners"]["__all_modules__"]["num_env_steps_trained"] == 3 * 32
        action = algo.compute_single_action(np.array([1.0, 0.0, 0.0], np.float32))
        assert action.shape == (1,) and -2.0 <= float(action[0]) <= 2.0
    finally:
        algo.stop()

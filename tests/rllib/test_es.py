"""ES runs an iteration with its rollouts as nbdist tasks and the update in the driver."""

from __future__ import annotations

import numpy as np
import pytest

from nbdist.rllib.algorithms.es import ESConfig

pytestmark = pytest.mark.usefixtures("cluster")


def test_es_runs_an_iteration_with_rollout_tasks() -> None:
    config = (ESConfig().environment("CartPole-v1")
              .training(episodes_per_batch=4, num_rollout_tasks=2, noise_stdev=0.1,
                        stepsize=0.05)
              .rl_module(model_config={"fcnet_hiddens": [8], "fcnet_activation": "tanh"})
              .debugging(seed=0))
    algo = config.build_algo()
    try:
        theta = algo.theta.copy()
        assert algo.env_runner_group.actors == []  # no runner actors: tasks sample
        result = algo.train()
        runners = result["env_runners"]
        assert runners["num_episodes"] == 4  # two antithetic pairs
        assert runners["num_env_steps_sampled_lifetime"] >= 4 * 8
        assert np.isfinite(runners["episode_return_mean"])
        learner = result["learners"]["default_policy"]
        assert learner["num_perturbations"] == 2 and learner["grad_norm"] > 0
        assert result["training_iteration"] == 1
        assert not np.array_equal(theta, algo.theta)
        np.testing.assert_array_equal(algo.module.flat_parameters(), algo.theta.astype(np.float32))
    finally:
        algo.stop()

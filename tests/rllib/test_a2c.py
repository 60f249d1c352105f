"""A2C (synchronous) and A3C (asynchronous runner actors) run iterations on CartPole with real
env-runner actors and give Ray's result keys."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from polling import until

from nbdist.rllib.algorithms.a2c import A2CConfig
from nbdist.rllib.algorithms.a3c import A3CConfig

pytestmark = pytest.mark.usefixtures("cluster")


def weights(algo: object) -> torch.Tensor:
    return torch.nn.utils.parameters_to_vector(algo.module.parameters()).detach().clone()  # type: ignore[attr-defined]


def test_a2c_runs_an_iteration_on_runner_actors() -> None:
    config = (A2CConfig().environment("CartPole-v1").env_runners(num_env_runners=1)
              .training(train_batch_size=100)
              .rl_module(model_config={"fcnet_hiddens": [16]}))
    algo = config.build_algo()
    try:
        before = weights(algo)
        result = algo.train()
        assert result["env_runners"]["num_env_steps_sampled_lifetime"] == 100
        assert result["env_runners"]["num_healthy_workers"] == 1
        learner = result["learners"]["default_policy"]
        for key in ("total_loss", "policy_loss", "vf_loss", "entropy"):
            assert np.isfinite(learner[key]), key
        assert result["learners"]["__all_modules__"]["num_env_steps_trained"] == 100
        assert not torch.equal(before, weights(algo))
    finally:
        algo.stop()


def test_a3c_applies_each_runners_fragment_as_it_arrives() -> None:
    config = (A3CConfig().environment("CartPole-v1")
              .env_runners(num_env_runners=2, rollout_fragment_length=25)
              .training(train_batch_size=100)
              .rl_module(model_config={"fcnet_hiddens": [16]}))
    algo = config.build_algo()
    try:
        first, second = algo.train(), algo.train()
        for result in (first, second):
            learner = result["learners"]["default_policy"]
            assert learner["num_async_updates"] == 4  # one update per 25-step fragment
            assert result["learners"]["__all_modules__"]["num_env_steps_trained"] == 100
        assert second["env_runners"]["num_env_steps_sampled_lifetime"] == 200
        assert second["training_iteration"] == 2
    finally:
        algo.stop()


def test_a3c_replaces_a_runner_that_dies_and_the_iteration_goes_on() -> None:
    import nbdist

    config = (A3CConfig().environment("CartPole-v1")
              .env_runners(num_env_runners=2, rollout_fragment_length=25)
              .training(train_batch_size=50)
              .rl_module(model_config={"fcnet_hiddens": [16]}))
    algo = config.build_algo()
    try:
        algo.train()
        nbdist.kill(algo.env_runner_group.actors[0])
        # The other runner's fragments may fill iterations before the dead one's failure is
        # read (on a loaded machine the kill takes a while to be seen); it is read in a later one.
        results: list[dict] = []

        def restarted() -> int:
            results.append(algo.train())
            return int(results[-1]["fault_tolerance"]["num_remote_worker_restarts"])

        until(restarted, timeout=120, interval=0)
        result = results[-1]
        assert result["fault_tolerance"]["num_remote_worker_restarts"] == 1
        assert result["learners"]["__all_modules__"]["num_env_steps_trained"] >= 50
        assert result["env_runners"]["num_healthy_workers"] == 2
    finally:
        algo.stop()

"""An algorithm with real env-runner actors: builders and to_dict, Ray's result keys, the
object-store weight broadcast, evaluation, a checkpoint round trip, a runner killed mid-run
replaced, an env that raises reported with its traceback, envs by id, class and registered
creator."""

from __future__ import annotations

import math
import os
import signal
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from nbdist import tune
from nbdist.rllib.algorithms.algorithm import Algorithm
from nbdist.rllib.algorithms.ppo import PPO, PPOConfig

SMALL = {"fcnet_hiddens": [16], "fcnet_activation": "tanh"}


def small_ppo(env: Any = "CartPole-v1", runners: int = 0) -> PPOConfig:
    return (PPOConfig().environment(env).env_runners(num_env_runners=runners)
            .training(train_batch_size=200, minibatch_size=100, num_epochs=1)
            .rl_module(model_config=SMALL))


def test_builders_set_rllib_fields_and_to_dict_round_trips() -> None:
    config = (PPOConfig().environment("CartPole-v1", env_config={"a": 1})
              .env_runners(num_env_runners=3, num_envs_per_env_runner=2,
                           rollout_fragment_length=50)
              .training(lr=1e-3, gamma=0.95, train_batch_size=600, lambda_=0.9, clip_param=0.1)
              .learners(num_learners=0).evaluation(evaluation_interval=2)
              .framework("torch").debugging(seed=7)
              .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda aid, *a, **k: "p0"))
    d = config.to_dict()
    assert (d["num_env_runners"], d["num_envs_per_env_runner"], d["lr"], d["gamma"],
            d["lambda"], d["clip_param"], d["seed"], d["framework"]) == \
        (3, 2, 1e-3, 0.95, 0.9, 0.1, 7, "torch")
    assert set(d["policies"]) == {"p0", "p1"}
    again = PPOConfig().update_from_dict(d)
    assert (again.lambda_, again.num_env_runners, again.env_config) == (0.9, 3, {"a": 1})
    assert dict(config)["train_batch_size"] == 600  # a mapping: Tune's param_space=config
    with pytest.raises(TypeError, match="unknown keyword"):
        PPOConfig().training(not_a_field=1)
    with pytest.raises(ValueError, match="torch only"):
        PPOConfig().framework("tf2")


def test_train_with_runner_actors_returns_rays_result_keys(cluster: None,
                                                           tmp_path: Any) -> None:
    algo = small_ppo(runners=2).build_algo()
    try:
        assert len(algo.env_runner_group.actors) == 2
        pids = algo.env_runner_group.foreach_env_runner(lambda r: os.getpid())
        assert len(set(pids)) == 2 and os.getpid() not in pids  # real runner processes
        result = algo.train()
        runners = result["env_runners"]
        assert runners["num_env_steps_sampled"] >= 200
        assert runners["num_env_steps_sampled_lifetime"] == result[
            "num_env_steps_sampled_lifetime"]
        assert runners["num_episodes"] > 0 and not math.isnan(runners["episode_return_mean"])
        learner = result["learners"]["default_policy"]
        assert {"total_loss", "policy_loss", "vf_loss", "entropy", "mean_kl_loss",
                "curr_kl_coeff"} <= set(learner)
        assert result["learners"]["__all_modules__"]["num_env_steps_trained"] >= 200
        assert result["training_iteration"] == 1

        # the runners act with the driver's weights, broadcast through the object store
        # with their next sample
        algo.train()
        algo.env_runner_group.sample(num_timesteps=10)
        driver = algo.get_module().get_state()
        remote = algo.env_runner_group.foreach_env_runner(lambda r: r.module.get_state(),
                                                          local_env_runner=False)
        for state in remote:
            assert all(np.array_equal(driver[k], state[k]) for k in driver)

        evaluation = algo.evaluate()["env_runners"]
        assert evaluation["num_episodes"] == 10 and evaluation["episode_return_mean"] > 0
        action = algo.compute_single_action(np.zeros(4, dtype=np.float32))
        assert action in (0, 1)

        path = algo.save_to_path(str(tmp_path / "ckpt"))
        restored = Algorithm.from_checkpoint(path)
        try:
            assert isinstance(restored, PPO) and restored.iteration == 2
            state = restored.get_module().get_state()
            assert all(np.array_equal(driver[k], state[k]) for k in driver)
            assert restored.train()["training_iteration"] == 3
        finally:
            restored.stop()
    finally:
        algo.stop()
    assert algo.env_runner_group.actors == []


def test_a_runner_that_dies_is_replaced_and_the_iteration_goes_on(cluster: None) -> None:
    algo = small_ppo(runners=2).build_algo()
    try:
        pid = algo.env_runner_group.foreach_env_runner(lambda r: os.getpid(),
                                                       local_env_runner=False)[0]
        os.kill(pid, signal.SIGKILL)
        result = algo.train()
        assert result["fault_tolerance"]["num_remote_worker_restarts"] >= 1
        assert result["env_runners"]["num_env_steps_sampled"] >= 200
        pids = algo.env_runner_group.foreach_env_runner(lambda r: os.getpid(),
                                                        local_env_runner=False)
        assert pid not in pids and len(pids) == 2
    finally:
        algo.stop()


class Corridor(gym.Env):  # type: ignore[misc]
    """Walk right to the end of a corridor (an Env class built with the env config)."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.length = int((config or {}).get("length", 5))
        self.fail_at = (config or {}).get("fail_at")
        self.observation_space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.pos = 0
        self.steps = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        self.pos = 0
        return np.array([0.0], np.float32), {}

    def step(self, action: int) -> Any:
        self.steps += 1
        if self.fail_at is not None and self.steps >= self.fail_at:
            raise ValueError(f"corridor broke at step {self.steps}")
        self.pos = max(0, self.pos + (1 if action == 1 else -1))
        done = self.pos >= self.length
        return np.array([self.pos], np.float32), 1.0 if done else -0.1, done, False, {}


def test_envs_by_class_and_by_registered_creator(cluster: None) -> None:
    tune.register_env("corridor-3", lambda cfg: Corridor({"length": 3, **cfg}))
    for env in (Corridor, "corridor-3"):
        algo = small_ppo(env).build_algo()
        try:
            result = algo.train()
            assert result["env_runners"]["num_env_steps_sampled"] >= 200
            assert algo.env_name in ("Corridor", "corridor-3")
        finally:
            algo.stop()


def test_an_env_that_raises_is_reported_with_its_traceback(cluster: None) -> None:
    algo = small_ppo(Corridor, runners=1).environment(env_config={"fail_at": 3}).build_algo()
    try:
        with pytest.raises(Exception) as info:
            algo.train()
        text = str(info.value)
        assert "corridor broke at step 3" in text
        assert "test_algorithm.py" in text and "in step" in text  # the env's own frame
    finally:
        algo.stop()


def test_policies_other_than_the_default_need_a_multi_agent_env() -> None:
    config = small_ppo().multi_agent(policies={"p0", "p1"},
                                     policy_mapping_fn=lambda aid, *a, **k: "p0")
    with pytest.raises(ValueError, match="MultiAgentEnv"):
        config.build_algo()


def test_an_unknown_env_name_says_what_an_env_can_be() -> None:
    with pytest.raises(ValueError, match="register_env"):
        PPOConfig().environment("NoSuchEnv-v9").build_algo()


def test_several_envs_per_runner_and_continuous_actions(cluster: None) -> None:
    algo = (small_ppo("CartPole-v1").env_runners(num_envs_per_env_runner=3)
            .debugging(seed=3).build_algo())
    try:
        runner = algo.env_runner
        assert len(runner.envs) == 3
        episodes = algo.sample_episodes(num_env_steps=60)
        assert sum(len(e) for e in episodes) >= 60
        assert len({e.id_ for e in episodes}) >= 3  # chunks of the three envs' episodes
        for episode in episodes:  # obs before and after every action; logp per action
            assert len(episode.observations) == len(episode) + 1
            assert len(episode.get_extra_model_outputs("action_logp")) == len(episode)
    finally:
        algo.stop()
    pendulum = small_ppo("Pendulum-v1").build_algo()  # a Box action space: a Gaussian policy
    try:
        result = pendulum.train()
        assert result["learners"]["default_policy"]["num_module_steps_trained"] >= 200
        action = pendulum.compute_single_action(np.zeros(3, dtype=np.float32))
        assert action.shape == (1,) and -2.0 <= float(action[0]) <= 2.0  # clipped to the space
    finally:
        pendulum.stop()

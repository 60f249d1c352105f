"""Tune searches over PPO configs: ``Tuner("PPO", param_space=config)`` by the registered name
and ``Tuner(PPO, param_space=config.to_dict())`` by class, each trial an algorithm in a trial
actor reporting Ray's result keys; a multi-agent config (its mapping fn shipped with it) runs
as a trial and reports per-policy returns."""

from __future__ import annotations

from typing import Any

from nbdist import tune
from nbdist.rllib.algorithms.ppo import PPO, PPOConfig
from nbdist.rllib.examples.envs.classes.multi_agent import MultiAgentCartPole


def config() -> PPOConfig:
    return (PPOConfig().environment("CartPole-v1")
            .training(train_batch_size=200, minibatch_size=100, num_epochs=1,
                      lr=tune.grid_search([1e-3, 1e-4]))
            .rl_module(model_config={"fcnet_hiddens": [8]}))


def check(results: Any) -> None:
    assert results.num_errors == 0, [r.error for r in results]
    assert len(results) == 2
    lrs = sorted(r.config["lr"] for r in results)
    assert lrs == [1e-4, 1e-3]
    for result in results:
        assert result.metrics["training_iteration"] == 2
        assert result.metrics["env_runners"]["num_env_steps_sampled_lifetime"] >= 400
    best = results.get_best_result("env_runners/episode_return_mean", "max")
    assert best.metrics["env_runners"]["episode_return_mean"] > 0


def test_tuner_by_registered_name_with_the_config_as_param_space(cluster: None,
                                                                  tmp_path: Any) -> None:
    tuner = tune.Tuner("PPO", param_space=config(),
                       run_config=tune.RunConfig(stop={"training_iteration": 2},
                                                 storage_path=str(tmp_path), verbose=0))
    check(tuner.fit())


def test_tuner_by_class_with_to_dict(cluster: None, tmp_path: Any) -> None:
    tuner = tune.Tuner(PPO, param_space=config().to_dict(),
                       run_config=tune.RunConfig(stop={"training_iteration": 2},
                                                 storage_path=str(tmp_path), verbose=0))
    check(tuner.fit())


def test_tuner_runs_a_multi_agent_config(cluster: None, tmp_path: Any) -> None:
    param_space = (config().environment(MultiAgentCartPole, env_config={"num_agents": 2})
                   .training(lr=1e-3)
                   .multi_agent(policies={"p0", "p1"},
                                policy_mapping_fn=lambda aid, episode, **kw: f"p{aid}"))
    results = tune.Tuner("PPO", param_space=param_space,
                         run_config=tune.RunConfig(stop={"training_iteration": 1},
                                                   storage_path=str(tmp_path),
                                                   verbose=0)).fit()
    assert results.num_errors == 0, [r.error for r in results]
    (result,) = results
    runners = result.metrics["env_runners"]
    assert set(runners["module_episode_returns_mean"]) == {"p0", "p1"}
    assert {"p0", "p1"} <= set(result.metrics["learners"])

"""Multi-agent training: RLlib's ``MultiAgentEnv`` contract and example envs, the multi-agent
env runner's per-agent trajectories, PPO with one module per policy (learning, the mapping fn,
``policies_to_train``, runner actors), Ray's per-agent and per-module result keys, and a
checkpoint round trip."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from nbdist.rllib.algorithms.algorithm import Algorithm
from nbdist.rllib.algorithms.dqn import DQNConfig
from nbdist.rllib.algorithms.ppo import PPOConfig
from nbdist.rllib.env import MultiAgentEnv, make_multi_agent
from nbdist.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner
from nbdist.rllib.examples.envs.classes.multi_agent import MultiAgentCartPole
from nbdist.rllib.examples.envs.classes.multi_agent.rock_paper_scissors import (
    RockPaperScissors,
)
from nbdist.rllib.examples.envs.classes.multi_agent.tic_tac_toe import TicTacToe

SMALL = {"fcnet_hiddens": [16], "fcnet_activation": "tanh"}


def by_agent(agent_id: Any, episode: Any, **kwargs: Any) -> str:
    return f"p{agent_id}"


def two_cartpoles(policies: Any = ("p0", "p1"), runners: int = 0) -> PPOConfig:
    return (PPOConfig().environment(MultiAgentCartPole, env_config={"num_agents": 2})
            .env_runners(num_env_runners=runners)
            .multi_agent(policies=set(policies), policy_mapping_fn=by_agent)
            .training(train_batch_size=200, minibatch_size=100, num_epochs=1)
            .rl_module(model_config=SMALL).debugging(seed=2))


def weights(algo: Algorithm, module_id: str) -> dict[str, np.ndarray]:
    return algo.get_module(module_id).get_state()


def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return all(np.array_equal(a[k], b[k]) for k in a)


def test_multi_agent_env_contract_of_the_example_envs() -> None:
    env = MultiAgentCartPole({"num_agents": 2})
    assert isinstance(env, MultiAgentEnv)
    assert env.possible_agents == [0, 1] and env.agents == [0, 1]
    assert env.get_observation_space(1) == env.observation_spaces[1] == \
        gym.make("CartPole-v1").observation_space
    assert env.get_action_space(0) == gym.spaces.Discrete(2)
    obs, infos = env.reset(seed=3)
    assert set(obs) == {0, 1} and set(infos) == {0, 1}
    assert env.observation_spaces[0].contains(obs[0])
    steps, gone = 0, []
    while True:
        obs, rewards, terminateds, truncateds, infos = env.step({a: 0 for a in env.agents})
        steps += 1
        assert "__all__" in terminateds and "__all__" in truncateds
        assert set(rewards) <= {0, 1} and all(r == 1.0 for r in rewards.values())
        gone += [a for a in rewards if terminateds[a] or truncateds[a]]
        assert env.agents == [a for a in (0, 1) if a not in gone]  # the done leave
        if terminateds["__all__"]:
            break
        assert not any(terminateds[a] for a in env.agents) and steps < 100
    assert sorted(gone) == [0, 1]  # always pushing left: both poles fall
    with pytest.raises(ValueError):
        env.step({})

    pair = make_multi_agent(lambda config: gym.make("CartPole-v1"))({"num_agents": 3})
    assert pair.possible_agents == [0, 1, 2] and set(pair.reset()[0]) == {0, 1, 2}

    rps = RockPaperScissors({})
    assert rps.possible_agents == ["player1", "player2"]
    assert rps.get_action_space("player2") == gym.spaces.Discrete(3)
    assert rps.reset() == ({"player1": 0, "player2": 0}, {})
    for move in range(10):
        obs, rewards, terminateds, truncateds, _ = rps.step(
            {"player1": RockPaperScissors.PAPER, "player2": RockPaperScissors.ROCK})
        assert obs == {"player1": RockPaperScissors.ROCK, "player2": RockPaperScissors.PAPER}
        assert rewards == {"player1": 1, "player2": -1}
        assert terminateds["__all__"] == (move == 9)
    assert RockPaperScissors({"sheldon_cooper_mode": True}).action_spaces["player1"].n == 5


class TakeTurns(MultiAgentEnv):
    """Two agents move in turn, four moves in all; a move is worth 1 to the mover and 10 to
    the other agent; each sees the move count."""

    def __init__(self, config: Any = None) -> None:
        super().__init__()
        self.agents = self.possible_agents = ["a", "b"]
        self.observation_spaces = {a: gym.spaces.Discrete(5) for a in self.agents}
        self.action_spaces = {a: gym.spaces.Discrete(2) for a in self.agents}

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        self.t = 0
        return {"a": 0}, {}

    def step(self, action_dict: dict[str, int]) -> Any:
        mover = "a" if self.t % 2 == 0 else "b"
        other = "b" if mover == "a" else "a"
        assert list(action_dict) == [mover], action_dict
        self.t += 1
        done = self.t >= 4
        obs = {} if done else {other: self.t}
        return obs, {mover: 1.0, other: 10.0}, {"__all__": done}, {"__all__": False}, {}


def test_runner_gives_each_agent_its_turns_and_the_rewards_since_its_last_move() -> None:
    from nbdist.rllib.core.rl_module import MultiRLModuleSpec, RLModuleSpec
    from nbdist.rllib.core.rl_module.rl_module import ActorCriticMLPModule

    def spec() -> RLModuleSpec:
        return RLModuleSpec(module_class=ActorCriticMLPModule,
                            observation_space=gym.spaces.Discrete(5),
                            action_space=gym.spaces.Discrete(2), model_config=SMALL)

    runner = MultiAgentEnvRunner(
        env_creator=TakeTurns, num_envs=1, seed=0, policy_mapping_fn=lambda aid, ep: f"m_{aid}",
        module_spec=MultiRLModuleSpec(rl_module_specs={"m_a": spec(), "m_b": spec()}))
    out = runner.sample(num_episodes=1)
    assert out["episode_returns"] == [44.0] and out["episode_lens"] == [4]
    assert out["agent_episode_returns"] == [{"a": 22.0, "b": 22.0}]
    assert out["module_episode_returns"] == [{"m_a": 22.0, "m_b": 22.0}]
    assert out["num_agent_steps"] == {"a": 2, "b": 2}
    (episode,) = out["episodes"]
    a, b = episode.agent_episodes["a"], episode.agent_episodes["b"]
    assert [list(map(int, x.observations)) for x in (a, b)] == [[0, 2, 2], [1, 3, 3]]
    # a move's reward: the mover's 1 and the other's move's 10 until the mover next observes
    # (or the episode ends); the 10 b got before it ever observed counts in its return only
    assert a.rewards == [11.0, 11.0] and b.rewards == [11.0, 1.0]
    assert a.is_terminated and b.is_terminated
    assert episode.module_for("b") == "m_b" and episode.get_return() == 34.0  # trajectories
    # chunks: an episode cut mid-way goes on with the same id and the pending move
    first = runner.sample(num_timesteps=3)
    second = runner.sample(num_timesteps=3)
    ids = [e.id_ for e in first["episodes"] + second["episodes"]]
    assert ids[0] == ids[1] and second["episode_returns"] == [44.0]
    runner.stop()


def test_ppo_improves_both_policies_on_two_agent_cartpole(cluster: None) -> None:
    config = (two_cartpoles().training(lr=1e-3, num_epochs=8, train_batch_size=1000,
                                       minibatch_size=128, lambda_=0.95, vf_loss_coeff=0.5)
              .rl_module(model_config={"fcnet_hiddens": [64]}).debugging(seed=1))
    algo = config.build_algo()
    try:
        history = []
        for _ in range(20):
            runners = algo.train()["env_runners"]
            per_module = runners["module_episode_returns_mean"]
            history.append(per_module)
            if min(per_module.values()) >= 50:
                break
        assert max(history[0].values()) < 35, history[0]  # random policies: about 22
        assert min(history[-1].values()) >= 50, history
        assert set(runners["agent_episode_returns_mean"]) == {0, 1}
        # the env's return is both agents' (each plays its own game)
        assert runners["episode_return_mean"] == pytest.approx(
            sum(runners["agent_episode_returns_mean"].values()), rel=0.02)
    finally:
        algo.stop()


def test_mapping_fn_and_policies_to_train_decide_what_learns(cluster: None) -> None:
    # Runner actors: the mapping fn, modules and episodes cross processes.
    algo = two_cartpoles(("p0", "p1", "p2"), runners=1).multi_agent(
        policies_to_train=["p0", "p2"]).build_algo()
    try:
        before = {m: weights(algo, m) for m in ("p0", "p1", "p2")}
        result = algo.train()
        runners, learners = result["env_runners"], result["learners"]
        assert set(learners) == {"p0", "__all_modules__"}  # p1 is frozen, p2 has no agent
        assert learners["p0"]["num_module_steps_trained"] > 0
        assert set(runners["num_module_steps_sampled"]) == {"p0", "p1"}
        assert set(runners["module_episode_returns_mean"]) == {"p0", "p1"}
        assert not same(before["p0"], weights(algo, "p0"))
        assert same(before["p1"], weights(algo, "p1")) and same(before["p2"],
                                                                  weights(algo, "p2"))
        algo.sample_episodes(num_env_steps=10)  # the new weights go with the next sample
        synced = algo.env_runner_group.foreach_env_runner(
            lambda r: r.module["p0"].get_state(), local_env_runner=False)
        assert same(synced[0], weights(algo, "p0"))  # the runner acts with the new weights
        assert algo.get_module("p9") is None
    finally:
        algo.stop()


def test_multi_agent_checkpoint_round_trip(cluster: None, tmp_path: Any) -> None:
    algo = two_cartpoles().build_algo()
    try:
        algo.train()
        result = algo.train()
        path = algo.save_to_path(str(tmp_path / "ckpt"))
        obs = np.array([0.01, 0.2, -0.03, -0.1], dtype=np.float32)
        actions = [algo.compute_single_action(obs, policy_id=m) for m in ("p0", "p1")]
    finally:
        algo.stop()
    restored = Algorithm.from_checkpoint(path)
    try:
        assert restored.is_multi_agent and restored.iteration == 2
        for m in ("p0", "p1"):
            assert same(weights(algo, m), weights(restored, m))
            assert same(restored.learner[m].module.get_state(), weights(algo, m))
        assert [restored.compute_single_action(obs, policy_id=m) for m in ("p0", "p1")] == \
            actions
        again = restored.train()
        assert again["training_iteration"] == 3
        assert again["env_runners"]["num_env_steps_sampled_lifetime"] > \
            result["env_runners"]["num_env_steps_sampled_lifetime"]
        assert set(again["env_runners"]["module_episode_returns_mean"]) == {"p0", "p1"}
    finally:
        restored.stop()


def test_ppo_on_a_turn_based_game_and_its_evaluation(cluster: None) -> None:
    # (greedy, an untrained player may pick an occupied field forever: evaluate exploring)
    algo = (PPOConfig().environment(TicTacToe).evaluation(evaluation_config={"explore": True})
            .multi_agent(policies={"x", "o"},
                         policy_mapping_fn=lambda aid, episode, **kw:
                         "x" if aid == "player1" else "o")
            .training(train_batch_size=300, minibatch_size=100, num_epochs=2)
            .rl_module(model_config=SMALL).debugging(seed=4).build_algo())
    try:
        result = algo.train()
        runners = result["env_runners"]
        steps = runners["num_agent_steps_sampled"]
        assert steps["player1"] + steps["player2"] == runners["num_env_steps_sampled"]
        assert abs(steps["player1"] - steps["player2"]) <= runners["num_episodes"] + 1
        assert set(result["learners"]) == {"x", "o", "__all_modules__"}
        # one wins what the other loses; wasted moves cost their player alone
        assert runners["module_episode_returns_mean"].keys() == {"x", "o"}
        evaluation = algo.evaluate()["env_runners"]
        assert evaluation["num_episodes"] == 10
        assert set(evaluation["module_episode_returns_mean"]) == {"x", "o"}
        assert evaluation["episode_return_mean"] == pytest.approx(
            sum(evaluation["agent_episode_returns_mean"].values()))
    finally:
        algo.stop()


def test_algorithms_without_multi_agent_training_say_so() -> None:
    config = (DQNConfig().environment(MultiAgentCartPole, env_config={"num_agents": 2})
              .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=by_agent))
    with pytest.raises(NotImplementedError, match="multi-agent"):
        config.build_algo()
    with pytest.raises(ValueError, match="not among the policies"):
        two_cartpoles().multi_agent(policies={"p0"}).build_algo()

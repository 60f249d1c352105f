"""DQN on real env runners: it learns CartPole within a bounded number of iterations, and a
checkpoint brings back the module, the target network, the replay buffer and the counters."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nbdist.rllib.algorithms import Algorithm
from nbdist.rllib.algorithms.dqn import DQN, DQNConfig
from nbdist.rllib.algorithms.registry import get_algorithm_class

pytestmark = pytest.mark.usefixtures("cluster")


@pytest.mark.timeout(150)
def test_dqn_improves_on_cartpole_within_bounded_iterations() -> None:
    # Double Q, dueling, prioritized replay (the defaults) and 3-step returns, sampled in the
    # driver: the fastest way to the curve on 2 cores.
    config = (DQNConfig().environment("CartPole-v1").env_runners(num_env_runners=0)
              .training(lr=1e-3, train_batch_size=64, n_step=3,
                        num_steps_sampled_before_learning_starts=1000,
                        epsilon=[(0, 1.0), (8000, 0.02)])
              .rl_module(model_config={"fcnet_hiddens": [64, 64], "fcnet_activation": "relu"})
              .debugging(seed=0))
    algo = config.build_algo()
    try:
        # Greedy returns over 10 evaluation episodes (the training mean trails: it averages
        # the last 100 episodes, the early random ones included). A random policy gets ~20.
        curve = []
        for _ in range(10):
            result = algo.train()
            curve.append(algo.evaluate()["env_runners"]["episode_return_mean"])
            if curve[-1] >= 100:
                break
        assert curve[-1] >= 100, curve
        assert result["env_runners"]["episode_return_mean"] > 25, result["env_runners"]
        learner = result["learners"]["default_policy"]
        assert learner["num_updates"] > 0 and np.isfinite(learner["qf_loss"])
        assert result["replay_buffer"]["size"] == result["num_env_steps_sampled_lifetime"]
    finally:
        algo.stop()


def test_dqn_checkpoint_round_trip(tmp_path: Path) -> None:
    config = (DQNConfig().environment("CartPole-v1").env_runners(num_env_runners=1)
              .training(double_q=False, dueling=False, n_step=2, train_batch_size=16,
                        num_steps_sampled_before_learning_starts=50,
                        target_network_update_freq=60, replay_buffer_config={
                            "type": "EpisodeReplayBuffer", "capacity": 1000})
              .reporting(min_sample_timesteps_per_iteration=100)
              .rl_module(model_config={"fcnet_hiddens": [16]}))
    algo = config.build_algo()
    restored = None
    try:
        assert algo.module.value is None  # dueling=False: one Q head
        for _ in range(2):
            before = algo.train()
        assert before["training_iteration"] == 2 and before["num_env_steps_trained_lifetime"] > 0
        assert set(before["env_runners"]) >= {"episode_return_mean",
                                              "num_env_steps_sampled_lifetime"}
        path = algo.save_to_path(str(tmp_path / "dqn"))
        restored = Algorithm.from_checkpoint(path)
        assert type(restored) is DQN
        for name in ("module", "target_module"):
            mine, theirs = getattr(algo, name).get_state(), getattr(restored, name).get_state()
            assert mine.keys() == theirs.keys()
            for key in mine:
                np.testing.assert_array_equal(mine[key], theirs[key])
        assert len(restored.replay_buffer) == len(algo.replay_buffer) == 200
        assert restored.counters == algo.counters
        observations = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
        assert [algo.compute_single_action(o) for o in observations] == \
            [restored.compute_single_action(o) for o in observations]
        after = restored.train()
        assert after["training_iteration"] == 3
        assert after["num_env_steps_sampled_lifetime"] == 300
    finally:
        algo.stop()
        if restored is not None:
            restored.stop()


def test_the_algorithms_are_registered_by_name() -> None:
    from nbdist.rllib.algorithms import DQN as ByName
    from nbdist.rllib.algorithms.a2c import A2C
    from nbdist.rllib.algorithms.a3c import A3C
    from nbdist.rllib.algorithms.es import ES
    from nbdist.rllib.algorithms.sac import SAC

    assert ByName is DQN
    for name, cls in {"DQN": DQN, "SAC": SAC, "ES": ES, "A2C": A2C, "A3C": A3C}.items():
        assert get_algorithm_class(name) is cls

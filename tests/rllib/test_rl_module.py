"""The default module's action sampling: categorical draws in the right proportions with their
log-probabilities, greedy actions, seeded by torch's generator; Gaussian actions for Box."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from nbdist.rllib.core.rl_module import ActorCriticMLPModule, RLModuleSpec
from nbdist.rllib.core.rl_module.rl_module import sample_categorical


def test_categorical_draws_follow_the_probabilities_and_report_their_log_prob() -> None:
    torch.manual_seed(0)
    logits = np.log(np.array([[0.2, 0.5, 0.3]] * 20000))
    actions, logp = sample_categorical(logits, explore=True)
    assert np.bincount(actions, minlength=3) / len(actions) == pytest.approx([0.2, 0.5, 0.3],
                                                                             abs=0.015)
    assert np.allclose(logp, np.log([0.2, 0.5, 0.3])[actions], atol=1e-6)
    greedy, greedy_logp = sample_categorical(logits[:2], explore=False)
    assert greedy.tolist() == [1, 1] and np.allclose(greedy_logp, np.log(0.5))
    torch.manual_seed(5)
    first = sample_categorical(logits[:50], explore=True)[0]
    torch.manual_seed(5)
    assert np.array_equal(first, sample_categorical(logits[:50], explore=True)[0])


def test_module_actions_for_discrete_and_box_spaces() -> None:
    discrete = RLModuleSpec(ActorCriticMLPModule, gym.spaces.Box(-1, 1, (4,)),
                            gym.spaces.Discrete(2), model_config={"fcnet_hiddens": [8]}).build()
    actions, extras = discrete.compute_actions(np.zeros((3, 4), np.float32))
    assert actions.shape == (3,) and set(actions) <= {0, 1}
    assert extras["action_logp"].shape == (3,) and (extras["action_logp"] <= 0).all()
    box = RLModuleSpec(ActorCriticMLPModule, gym.spaces.Box(-1, 1, (3,)),
                       gym.spaces.Box(-2, 2, (2,)), model_config={"fcnet_hiddens": [8]}).build()
    actions, extras = box.compute_actions(np.zeros((5, 3), np.float32))
    assert actions.shape == (5, 2) and extras["action_logp"].shape == (5,)
    values = box.compute_values({"obs": box.preprocess(np.zeros((5, 3), np.float32))})
    assert values.shape == (5,)

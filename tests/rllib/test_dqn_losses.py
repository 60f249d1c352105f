"""DQN's losses against hand-computed values (torch, no cluster)."""

from __future__ import annotations

import pytest
import torch

from nbdist.rllib.algorithms.dqn.dqn_losses import (
    dueling_q,
    piecewise_schedule,
    td_loss,
    td_targets,
)


def test_dueling_aggregation_centres_the_advantages() -> None:
    q = dueling_q(torch.tensor([[1.0], [2.0]]), torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 3.0]]))
    torch.testing.assert_close(q, torch.tensor([[0.0, 1.0, 2.0], [1.0, 1.0, 4.0]]))


def test_td_target_plain_and_double_q_with_n_step_discounts() -> None:
    rewards = torch.tensor([1.0, 0.5, 0.5])
    discounts = torch.tensor([0.9, 0.9, 0.81])  # the last is a 2-step transition
    terminateds = torch.tensor([False, True, False])
    next_q_target = torch.tensor([[2.0, 5.0], [3.0, 1.0], [3.0, 1.0]])
    next_q_online = torch.tensor([[10.0, 0.0], [0.0, 10.0], [0.0, 10.0]])
    plain = td_targets(rewards, discounts, terminateds, next_q_target)
    torch.testing.assert_close(plain, torch.tensor([1 + 0.9 * 5, 0.5, 0.5 + 0.81 * 3]))
    double = td_targets(rewards, discounts, terminateds, next_q_target, next_q_online)
    torch.testing.assert_close(double, torch.tensor([1 + 0.9 * 2, 0.5, 0.5 + 0.81 * 1]))


def test_td_loss_huber_mse_and_importance_weights() -> None:
    q, targets = torch.tensor([1.0, 3.0]), torch.tensor([0.5, 0.0])
    loss, errors = td_loss(q, targets)
    torch.testing.assert_close(loss, torch.tensor((0.5 * 0.25 + 2.5) / 2))
    torch.testing.assert_close(errors, torch.tensor([0.5, 3.0]))
    weighted, _ = td_loss(q, targets, weights=torch.tensor([2.0, 0.0]))
    torch.testing.assert_close(weighted, torch.tensor(0.125))
    mse, _ = td_loss(q, targets, loss_fn="mse")
    torch.testing.assert_close(mse, torch.tensor(0.5 * (0.25 + 9.0) / 2))
    with pytest.raises(ValueError, match="huber"):
        td_loss(q, targets, loss_fn="l1")


def test_epsilon_schedule_interpolates_and_holds() -> None:
    schedule = [(0, 1.0), (100, 0.1)]
    assert piecewise_schedule(schedule, 0) == 1.0
    assert piecewise_schedule(schedule, 50) == pytest.approx(0.55)
    assert piecewise_schedule(schedule, 1000) == pytest.approx(0.1)
    assert piecewise_schedule(0.3, 7) == 0.3

"""SAC's losses against hand-computed values (torch, no cluster)."""

from __future__ import annotations

import math

import pytest
import torch

from nbdist.rllib.algorithms.sac.sac_losses import (
    actor_loss,
    alpha_loss,
    critic_loss,
    polyak_update,
    soft_q_target,
    squashed_log_prob,
    squashed_sample,
)


def test_squashed_log_prob_subtracts_the_tanh_jacobian() -> None:
    zero, one = torch.zeros(1, 1), torch.ones(1, 1)
    half_log_2pi = 0.5 * math.log(2 * math.pi)
    torch.testing.assert_close(squashed_log_prob(zero, zero, zero), torch.tensor([-half_log_2pi]))
    expected = -0.5 - half_log_2pi - math.log(1 - math.tanh(1.0) ** 2)
    torch.testing.assert_close(squashed_log_prob(one, zero, zero), torch.tensor([expected]))
    # Two dimensions sum; deep in the saturation the value stays finite.
    assert torch.isfinite(squashed_log_prob(torch.full((1, 2), 30.0), zero.expand(1, 2),
                                            zero.expand(1, 2))).all()
    action, log_prob = squashed_sample(zero, zero, deterministic=True)
    assert action.item() == 0.0 and log_prob.item() == pytest.approx(-half_log_2pi)


def test_soft_target_subtracts_the_entropy_term_from_the_smaller_critic() -> None:
    target = soft_q_target(rewards=torch.tensor([1.0, 1.0]),
                           terminateds=torch.tensor([False, True]),
                           next_q1=torch.tensor([2.0, 2.0]), next_q2=torch.tensor([3.0, 3.0]),
                           next_log_prob=torch.tensor([-1.0, -1.0]), alpha=0.5, discounts=0.9)
    torch.testing.assert_close(target, torch.tensor([1 + 0.9 * (2 + 0.5), 1.0]))


def test_actor_critic_and_temperature_losses() -> None:
    torch.testing.assert_close(
        actor_loss(torch.tensor([2.0, 0.0]), torch.tensor([3.0, -1.0]),
                   torch.tensor([-1.0, 1.0]), alpha=0.5),
        torch.tensor(((0.5 * -1 - 2) + (0.5 + 1)) / 2))
    loss, errors = critic_loss(torch.tensor([1.0]), torch.tensor([3.0]), torch.tensor([2.0]))
    torch.testing.assert_close(loss, torch.tensor(1.0))
    torch.testing.assert_close(errors, torch.tensor([0.0]))
    # Entropy 2 above the target -1: alpha's loss pushes log_alpha down.
    log_alpha = torch.tensor(math.log(0.5), requires_grad=True)
    temperature = alpha_loss(log_alpha, torch.tensor([-1.0, -3.0]), target_entropy=-1.0)
    torch.testing.assert_close(temperature.detach(), torch.tensor(3 * math.log(0.5)))
    temperature.backward()
    assert log_alpha.grad is not None and log_alpha.grad.item() == 3.0


def test_polyak_update_moves_the_target_by_tau() -> None:
    target, source = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)
    torch.nn.init.zeros_(target.weight), torch.nn.init.zeros_(target.bias)
    torch.nn.init.ones_(source.weight), torch.nn.init.ones_(source.bias)
    polyak_update(target, source, tau=0.1)
    torch.testing.assert_close(target.weight.data, torch.full((1, 2), 0.1))
    torch.testing.assert_close(target.bias.data, torch.full((1,), 0.1))

"""A2C's returns and loss against hand-computed values (torch, no cluster)."""

from __future__ import annotations

import torch

from nbdist.rllib.algorithms.a2c.a2c_losses import a2c_loss, discounted_returns


def test_returns_stop_at_a_termination_and_bootstrap_at_truncation_and_the_end() -> None:
    rewards = torch.ones(4)
    values_next = torch.tensor([0.0, 4.0, 0.0, 10.0])
    none = torch.zeros(4, dtype=torch.bool)
    terminated = torch.tensor([False, True, False, False])
    torch.testing.assert_close(discounted_returns(rewards, terminated, none, values_next, 0.5),
                               torch.tensor([1.5, 1.0, 4.0, 6.0]))
    torch.testing.assert_close(discounted_returns(rewards, none, terminated, values_next, 0.5),
                               torch.tensor([2.5, 3.0, 4.0, 6.0]))


def test_a2c_loss_parts() -> None:
    values = torch.tensor([1.0, 2.0], requires_grad=True)
    total, parts = a2c_loss(log_probs=torch.tensor([-1.0, -2.0]), values=values,
                            returns=torch.tensor([2.0, 1.0]), entropy=torch.tensor([0.5, 1.5]),
                            vf_loss_coeff=0.5, entropy_coeff=0.01)
    torch.testing.assert_close(parts["policy_loss"], torch.tensor(-0.5))
    torch.testing.assert_close(parts["vf_loss"], torch.tensor(1.0))
    torch.testing.assert_close(parts["entropy"], torch.tensor(1.0))
    torch.testing.assert_close(total.detach(), torch.tensor(-0.5 + 0.5 - 0.01))
    total.backward()
    # Only the value term reaches V: d/dV 0.5 * mean((V - R)^2) = 0.5 * (V - R).
    torch.testing.assert_close(values.grad, torch.tensor([-0.5, 0.5]))

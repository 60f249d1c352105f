"""A2C/A3C's pure functions of tensors (Mnih et al. 2016): bootstrapped discounted returns of a
rollout fragment and the actor-critic loss (policy gradient, value error, entropy bonus)."""

from __future__ import annotations

import torch


def discounted_returns(rewards: torch.Tensor, terminateds: torch.Tensor,
                       truncateds: torch.Tensor, values_next: torch.Tensor,
                       gamma: float) -> torch.Tensor:
    """One env's fragment, time-major, length T: ``R_t = r_t + gamma R_{t+1}``, cut where an
    episode ends. After a termination nothing is added; after a truncation, or at the
    fragment's end, the bootstrap ``values_next[t]`` (V of the observation after step t)
    stands in for the rest of the episode."""
    returns = torch.zeros_like(rewards, dtype=torch.float32)
    following = torch.zeros((), dtype=torch.float32)
    last = len(rewards) - 1
    for t in range(last, -1, -1):
        if terminateds[t]:
            following = torch.zeros(())
        elif truncateds[t] or t == last:
            following = values_next[t].float()
        following = rewards[t].float() + gamma * following
        returns[t] = following
    return returns


def a2c_loss(log_probs: torch.Tensor, values: torch.Tensor, returns: torch.Tensor,
             entropy: torch.Tensor, vf_loss_coeff: float = 0.5,
             entropy_coeff: float = 0.01) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``-mean(log pi(a|s) A) + vf_loss_coeff * mean((V - R)^2) - entropy_coeff * mean(H)``
    with advantages ``A = R - V`` (V detached there), and the three parts by name."""
    advantages = (returns - values).detach()
    policy_loss = -(log_probs * advantages).mean()
    vf_loss = (values - returns).pow(2).mean()
    mean_entropy = entropy.mean()
    total = policy_loss + vf_loss_coeff * vf_loss - entropy_coeff * mean_entropy
    return total, {"policy_loss": policy_loss.detach(), "vf_loss": vf_loss.detach(),
                   "entropy": mean_entropy.detach()}

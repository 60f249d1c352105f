"""SAC's pure functions of tensors (Haarnoja et al. 2018): the tanh-squashed Gaussian policy's
sample and log-probability, the soft Q target, the actor, critic and temperature losses, and the
Polyak update of the target critics (DQN's, re-exported). No modules' state, no processes."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from nbdist.rllib.algorithms.dqn.dqn_losses import polyak_update

__all__ = ["actor_loss", "alpha_loss", "critic_loss", "polyak_update", "soft_q_target",
           "squashed_log_prob", "squashed_sample"]

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0


def squashed_log_prob(pre_tanh: torch.Tensor, mean: torch.Tensor,
                      log_std: torch.Tensor) -> torch.Tensor:
    """log pi(a|s) of ``a = tanh(u)``, ``u ~ N(mean, exp(log_std))``, summed over the action's
    dimensions: the Gaussian's log density of u minus log |d tanh(u) / du|, written
    ``2 (log 2 - u - softplus(-2u))`` to stay finite where tanh saturates."""
    std = log_std.exp()
    gaussian = (-0.5 * ((pre_tanh - mean) / std).pow(2) - log_std
                - 0.5 * math.log(2 * math.pi))
    jacobian = 2.0 * (math.log(2.0) - pre_tanh - F.softplus(-2.0 * pre_tanh))
    return (gaussian - jacobian).sum(dim=-1)


def squashed_sample(mean: torch.Tensor, log_std: torch.Tensor,
                    deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """An action in (-1, 1)^d (reparameterised, so gradients reach mean and log_std) and its
    log-probability. ``deterministic``: tanh(mean)."""
    log_std = log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)
    pre_tanh = mean if deterministic else mean + log_std.exp() * torch.randn_like(mean)
    return torch.tanh(pre_tanh), squashed_log_prob(pre_tanh, mean, log_std)


def soft_q_target(rewards: torch.Tensor, terminateds: torch.Tensor, next_q1: torch.Tensor,
                  next_q2: torch.Tensor, next_log_prob: torch.Tensor, alpha: torch.Tensor | float,
                  discounts: torch.Tensor | float) -> torch.Tensor:
    """``r + discount (1 - terminated) (min(Q1', Q2') - alpha log pi(a'|s'))``, a' drawn from
    the current policy at s' and the Q's from the target critics. No gradient flows through."""
    with torch.no_grad():
        soft_value = torch.min(next_q1, next_q2) - alpha * next_log_prob
        return rewards.float() + discounts * (1.0 - terminateds.float()) * soft_value


def critic_loss(q1: torch.Tensor, q2: torch.Tensor, targets: torch.Tensor,
                weights: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Both critics' half squared errors to the soft target (importance-weighted if
    ``weights``), summed; and the TD errors (their mean over the two critics)."""
    per_item = 0.5 * ((q1 - targets).pow(2) + (q2 - targets).pow(2))
    if weights is not None:
        per_item = per_item * weights
    return per_item.mean(), (0.5 * (q1 + q2) - targets).detach()


def actor_loss(q1: torch.Tensor, q2: torch.Tensor, log_prob: torch.Tensor,
               alpha: torch.Tensor | float) -> torch.Tensor:
    """``mean(alpha log pi(a|s) - min(Q1, Q2)(s, a))``, a the policy's reparameterised sample:
    the policy maximises the soft value (Q plus alpha times the entropy)."""
    return (alpha * log_prob - torch.min(q1, q2)).mean()


def alpha_loss(log_alpha: torch.Tensor, log_prob: torch.Tensor,
               target_entropy: float) -> torch.Tensor:
    """``-mean(log_alpha (log pi + target_entropy))``: alpha grows while the policy's entropy
    is below the target and shrinks above it."""
    return -(log_alpha * (log_prob.detach() + target_entropy)).mean()

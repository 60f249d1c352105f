"""PPO's pure functions: generalised advantage estimation and the clipped surrogate loss.

No actors, no modules: arrays and tensors in, numbers out, unit-tested against hand-computed
values (tests/rllib/test_ppo_losses.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def compute_gae(rewards: Any, values: Any, *, terminated: bool, gamma: float,
                lambda_: float) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and value targets of one episode chunk of T steps.

    ``values`` holds T+1 estimates: one per observation, the last one the chunk's final
    observation's (the bootstrap; taken as 0 when the episode ``terminated``, kept when it was
    truncated or cut). With ``delta_t = r_t + gamma * V(s_t+1) - V(s_t)``::

        A_t = delta_t + gamma * lambda * A_t+1        (A_T = 0)
        value target_t = A_t + V(s_t)
    """
    r = np.asarray(rewards, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64).copy()
    if len(v) != len(r) + 1:
        raise ValueError(f"compute_gae needs len(values) == len(rewards) + 1, got {len(v)} "
                         f"and {len(r)}")
    if terminated:
        v[-1] = 0.0
    deltas = r + gamma * v[1:] - v[:-1]
    advantages = np.zeros_like(r)
    running = 0.0
    for t in range(len(r) - 1, -1, -1):
        running = deltas[t] + gamma * lambda_ * running
        advantages[t] = running
    return advantages.astype(np.float32), (advantages + v[:-1]).astype(np.float32)


def ppo_loss(*, logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
             vf_preds: torch.Tensor, value_targets: torch.Tensor, entropy: torch.Tensor,
             kl: torch.Tensor | None, clip_param: float, vf_clip_param: float,
             vf_loss_coeff: float, entropy_coeff: float,
             kl_coeff: float) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO's total loss over a minibatch (all inputs per row), and its parts::

        ratio = exp(logp - old_logp)
        surrogate = min(A * ratio, A * clip(ratio, 1 - clip_param, 1 + clip_param))
        vf_loss = min((V - target)^2, vf_clip_param)
        total = mean(-surrogate + vf_loss_coeff * vf_loss - entropy_coeff * entropy)
                + kl_coeff * mean(kl)                   (the KL term only if kl is given)
    """
    ratio = torch.exp(logp - old_logp)
    surrogate = torch.min(advantages * ratio,
                          advantages * torch.clamp(ratio, 1 - clip_param, 1 + clip_param))
    vf_loss = torch.pow(vf_preds - value_targets, 2.0)
    vf_loss_clipped = torch.clamp(vf_loss, 0, vf_clip_param)
    total = torch.mean(-surrogate + vf_loss_coeff * vf_loss_clipped - entropy_coeff * entropy)
    mean_kl = torch.mean(kl) if kl is not None else torch.zeros(())
    if kl is not None and kl_coeff:
        total = total + kl_coeff * mean_kl
    with torch.no_grad():
        stats = {"total_loss": float(total), "policy_loss": float(torch.mean(-surrogate)),
                 "vf_loss": float(torch.mean(vf_loss_clipped)),
                 "vf_loss_unclipped": float(torch.mean(vf_loss)),
                 "entropy": float(torch.mean(entropy)), "mean_kl_loss": float(mean_kl)}
    return total, stats

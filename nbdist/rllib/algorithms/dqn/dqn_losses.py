"""DQN's pure functions of tensors: dueling aggregation, the TD target (with double Q and
n-step discounts), the TD loss, the epsilon schedule and the target networks' update. No modules, no processes."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F


def dueling_q(value: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    """Q = V + A - mean_a A (Wang et al. 2016): ``value`` is [B, 1] or [B], ``advantages``
    [B, A]."""
    if value.dim() == advantages.dim() - 1:
        value = value.unsqueeze(-1)
    return value + advantages - advantages.mean(dim=-1, keepdim=True)


def td_targets(rewards: torch.Tensor, discounts: torch.Tensor, terminateds: torch.Tensor,
               next_q_target: torch.Tensor,
               next_q_online: torch.Tensor | None = None) -> torch.Tensor:
    """``r + discount * (1 - terminated) * V(s')``, with V(s') the target network's value of
    the best next action: chosen by the online network's ``next_q_online`` (double Q, van
    Hasselt et al. 2016) if given, by the target network itself otherwise. ``discounts`` is
    gamma**k for a k-step transition (a float for one-step ones). No gradient flows through."""
    with torch.no_grad():
        if next_q_online is None:
            next_value = next_q_target.max(dim=-1).values
        else:
            best = next_q_online.argmax(dim=-1, keepdim=True)
            next_value = next_q_target.gather(-1, best).squeeze(-1)
        alive = 1.0 - terminateds.float()
        return rewards.float() + discounts * alive * next_value


def td_loss(q_taken: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor | None = None,
            loss_fn: str = "huber") -> tuple[torch.Tensor, torch.Tensor]:
    """The mean (importance-weighted) TD loss and the TD errors ``q_taken - targets``.
    ``loss_fn``: "huber" (smooth L1 with delta 1) or "mse" (half the squared error)."""
    td_error = q_taken - targets
    if loss_fn == "huber":
        per_item = F.smooth_l1_loss(q_taken, targets, reduction="none")
    elif loss_fn == "mse":
        per_item = 0.5 * td_error.pow(2)
    else:
        raise ValueError(f"td_error_loss_fn must be 'huber' or 'mse', not {loss_fn!r}.")
    if weights is not None:
        per_item = per_item * weights
    return per_item.mean(), td_error.detach()


def piecewise_schedule(schedule: float | Sequence[Sequence[float]], t: int) -> float:
    """The value at step ``t`` of a schedule: a constant, or Ray's list of ``(step, value)``
    points, interpolated linearly between them and held after the last."""
    if isinstance(schedule, (int, float)):
        return float(schedule)
    points = sorted((float(s), float(v)) for s, v in schedule)
    if not points:
        raise ValueError("A schedule needs at least one (step, value) point.")
    if t <= points[0][0]:
        return points[0][1]
    for (s0, v0), (s1, v1) in zip(points, points[1:], strict=False):
        if t <= s1:
            return v0 + (v1 - v0) * (t - s0) / (s1 - s0) if s1 > s0 else v1
    return points[-1][1]


@torch.no_grad()
def polyak_update(target: torch.nn.Module, source: torch.nn.Module, tau: float) -> None:
    """``target <- tau * source + (1 - tau) * target``, parameter by parameter."""
    for t, s in zip(target.parameters(), source.parameters(), strict=True):
        t.mul_(1.0 - tau).add_(s, alpha=tau)

"""PPO's advantages (GAE) and loss against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nbdist.rllib.algorithms.ppo.ppo_losses import compute_gae, ppo_loss


def test_gae_bootstraps_a_cut_chunk_from_its_last_value() -> None:
    # deltas: 1 + .9*.4 - .5 = .86, 1 + .9*.3 - .4 = .87, 1 + .9*.2 - .3 = .88; gamma*lambda .72
    adv, targets = compute_gae([1, 1, 1], [0.5, 0.4, 0.3, 0.2], terminated=False, gamma=0.9,
                               lambda_=0.8)
    assert adv == pytest.approx([0.86 + 0.72 * (0.87 + 0.72 * 0.88), 0.87 + 0.72 * 0.88, 0.88])
    assert adv == pytest.approx([1.942592, 1.5036, 0.88])
    assert targets == pytest.approx([2.442592, 1.9036, 1.18])


def test_gae_drops_the_bootstrap_of_a_terminated_episode() -> None:
    adv, targets = compute_gae([1, 1, 1], [0.5, 0.4, 0.3, 0.2], terminated=True, gamma=0.9,
                               lambda_=0.8)
    assert adv == pytest.approx([1.84928, 1.374, 0.7])
    assert targets == pytest.approx([2.34928, 1.774, 1.0])


def test_gae_with_lambda_one_is_the_discounted_return_minus_the_baseline() -> None:
    adv, targets = compute_gae([1, 2], [3, 5, 7], terminated=False, gamma=0.5, lambda_=1.0)
    # returns with bootstrap 7: G1 = 2 + .5*7 = 5.5, G0 = 1 + .5*5.5 = 3.75
    assert targets == pytest.approx([3.75, 5.5])
    assert adv == pytest.approx([0.75, 0.5])


def test_gae_checks_the_number_of_values() -> None:
    with pytest.raises(ValueError, match="len\\(values\\) == len\\(rewards\\) \\+ 1"):
        compute_gae([1, 1], [0.0, 0.0], terminated=True, gamma=0.9, lambda_=0.9)


def test_ppo_loss_clips_the_ratio_and_the_value_loss() -> None:
    t = torch.tensor
    total, stats = ppo_loss(
        logp=t([math.log(0.5), math.log(0.2)]), old_logp=t([math.log(0.25), math.log(0.4)]),
        advantages=t([1.0, -1.0]), vf_preds=t([1.0, 0.0]), value_targets=t([3.0, 0.5]),
        entropy=t([0.6, 0.4]), kl=t([0.1, 0.3]), clip_param=0.2, vf_clip_param=3.0,
        vf_loss_coeff=0.5, entropy_coeff=0.1, kl_coeff=0.5)
    # ratios 2.0 and 0.5, clipped to 1.2 and 0.8: surrogates min(2, 1.2) = 1.2 and
    # min(-0.5, -0.8) = -0.8; squared value errors 4 (clipped to 3) and 0.25.
    # rows: -1.2 + .5*3 - .1*.6 = .24 and .8 + .5*.25 - .1*.4 = .885; mean .5625; + .5 * .2
    assert float(total) == pytest.approx(0.6625)
    assert stats["policy_loss"] == pytest.approx(-0.2)
    assert stats["vf_loss"] == pytest.approx(1.625)
    assert stats["vf_loss_unclipped"] == pytest.approx(2.125)
    assert stats["entropy"] == pytest.approx(0.5)
    assert stats["mean_kl_loss"] == pytest.approx(0.2)


def test_ppo_loss_gradient_vanishes_where_the_ratio_is_clipped() -> None:
    logp = torch.tensor([math.log(0.5), math.log(0.3)], requires_grad=True)
    old = torch.tensor([math.log(0.25), math.log(0.3)])
    zero = torch.zeros(2)
    total, _ = ppo_loss(logp=logp, old_logp=old, advantages=torch.tensor([1.0, 1.0]),
                        vf_preds=zero, value_targets=zero, entropy=zero, kl=None,
                        clip_param=0.2, vf_clip_param=10.0, vf_loss_coeff=1.0,
                        entropy_coeff=0.0, kl_coeff=0.0)
    total.backward()
    assert logp.grad is not None
    # row 0: ratio 2 > 1.2 with a positive advantage: clipped, no gradient; row 1: ratio 1:
    # d(-mean(ratio * A))/dlogp = -ratio * A / 2 = -0.5
    assert np.allclose(logp.grad.numpy(), [0.0, -0.5])

"""Evolution strategies' ranks, gradient estimate and Adam step against hand-computed values."""

from __future__ import annotations

import numpy as np

from nbdist.rllib.algorithms.es.es_utils import Adam, centered_ranks, es_gradient


def test_centered_ranks_span_minus_a_half_to_a_half() -> None:
    np.testing.assert_allclose(centered_ranks(np.array([10.0, -1.0, 3.0, 7.0])),
                               [0.5, -0.5, -1 / 6, 1 / 6])
    np.testing.assert_allclose(centered_ranks(np.array([[1.0, 4.0], [2.0, 3.0]])),
                               [[-0.5, 0.5], [-1 / 6, 1 / 6]])


def test_es_gradient_from_antithetic_pairs() -> None:
    noise = np.array([[1.0, 0.0], [0.0, 1.0]])
    # Ranks of [10, -1, 3, 7]: [.5, -.5, -1/6, 1/6]; weights [1, -1/3]; / (2 * 2 * 0.5).
    gradient = es_gradient(noise, np.array([10.0, 3.0]), np.array([-1.0, 7.0]), sigma=0.5)
    np.testing.assert_allclose(gradient, [0.5, -1 / 6])


def test_adams_first_step_moves_each_coordinate_by_lr_up_the_gradient() -> None:
    adam = Adam(3, lr=0.01)
    theta = adam.step(np.zeros(3), np.array([2.0, -0.5, 0.0]))
    np.testing.assert_allclose(theta, [0.01, -0.01, 0.0], atol=1e-7)

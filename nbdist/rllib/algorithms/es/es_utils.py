"""Evolution strategies' pure functions (Salimans et al. 2017), numpy only: the centered ranks
that make the update invariant to the returns' scale, the antithetic gradient estimate, and the
Adam step the driver applies to the flat parameter vector."""

from __future__ import annotations

import numpy as np


def compute_ranks(x: np.ndarray) -> np.ndarray:
    """The rank (0 .. n-1) of each element of ``x``, ties broken by position."""
    flat = np.asarray(x).ravel()
    ranks = np.empty(len(flat), dtype=np.float64)
    ranks[flat.argsort(kind="stable")] = np.arange(len(flat))
    return ranks.reshape(np.shape(x))


def centered_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks of ``x`` over all its elements, scaled to [-0.5, 0.5]."""
    n = np.size(x)
    if n < 2:
        return np.zeros(np.shape(x))
    return compute_ranks(x) / (n - 1) - 0.5


def es_gradient(noise: np.ndarray, returns_pos: np.ndarray, returns_neg: np.ndarray,
                sigma: float) -> np.ndarray:
    """The ascent direction of the expected return from antithetic pairs: row i of ``noise``
    ([n, d]) was evaluated at theta + sigma eps_i (``returns_pos[i]``) and theta - sigma eps_i
    (``returns_neg[i]``); the returns of all 2n evaluations are replaced by their centered
    ranks, and the estimate is ``sum_i (rank+_i - rank-_i) eps_i / (2 n sigma)``."""
    ranks = centered_ranks(np.stack([returns_pos, returns_neg], axis=1))
    weights = ranks[:, 0] - ranks[:, 1]
    return weights @ noise / (2 * len(weights) * sigma)


class Adam:
    """Adam over a flat numpy parameter vector, ascending ``gradient``."""

    def __init__(self, size: int, lr: float, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8) -> None:
        self.lr, self.beta1, self.beta2, self.epsilon = lr, beta1, beta2, epsilon
        self.m = np.zeros(size)
        self.v = np.zeros(size)
        self.t = 0

    def step(self, theta: np.ndarray, gradient: np.ndarray) -> np.ndarray:
        """``theta`` moved one Adam step up ``gradient``."""
        self.t += 1
        self.m = self.beta1 * self.m + (1 - self.beta1) * gradient
        self.v = self.beta2 * self.v + (1 - self.beta2) * gradient ** 2
        step = (self.lr * np.sqrt(1 - self.beta2 ** self.t) / (1 - self.beta1 ** self.t)
                * self.m / (np.sqrt(self.v) + self.epsilon))
        return theta + step

"""N-step transitions from one environment's consecutive steps (numpy only).

Input: one env's steps in time order, arrays of length T: ``obs[t]``, ``actions[t]``,
``rewards[t]``, ``new_obs[t]`` (the observation after step t), ``terminateds[t]`` and
``truncateds[t]`` (the episode ended at step t). Output: one transition per step t, whose
reward is ``r_t + gamma r_{t+1} + ... + gamma^{k-1} r_{t+k-1}`` over the k <= n steps that
follow t inside its episode and inside the fragment, whose ``new_obs``/``terminateds`` are those
of step t+k-1, and whose ``discounts`` is ``gamma^k``: the factor of the bootstrap value in the
TD target. A fragment's last steps get fewer than n rewards, not a wrong target.
"""

from __future__ import annotations

import numpy as np

Batch = dict[str, np.ndarray]


def n_step_transitions(steps: Batch, n: int, gamma: float) -> Batch:
    """The n-step transitions of ``steps`` (see the module docstring)."""
    if n < 1:
        raise ValueError(f"n_step must be at least 1, not {n}.")
    rewards = np.asarray(steps["rewards"], dtype=np.float32)
    ends = np.asarray(steps["terminateds"], dtype=bool) | np.asarray(steps["truncateds"],
                                                                     dtype=bool)
    length = len(rewards)
    starts = np.arange(length)
    returns = np.zeros(length, dtype=np.float32)
    discounts = np.ones(length, dtype=np.float32)
    last = starts.copy()
    stopped = np.zeros(length, dtype=bool)
    for k in range(n):
        index = starts + k
        active = ~stopped & (index < length)
        j = index[active]
        returns[active] += discounts[active] * rewards[j]
        discounts[active] *= gamma
        last[active] = j
        stopped |= ~active
        stopped[active] |= ends[j]
    return {"obs": np.asarray(steps["obs"]), "actions": np.asarray(steps["actions"]),
            "rewards": returns, "new_obs": np.asarray(steps["new_obs"])[last],
            "terminateds": np.asarray(steps["terminateds"], dtype=bool)[last],
            "discounts": discounts}

"""Replay buffers of transitions for the off-policy algorithms (DQN, SAC): numpy only.

A buffer holds transitions as columns (one numpy array per key: ``obs``, ``actions``,
``rewards``, ``new_obs``, ``terminateds``, ``discounts``, ...) in a ring of ``capacity`` rows:
the columns are allocated from the first batch added (their dtypes and row shapes), each later
``add`` writes at the ring's head and wraps, overwriting the oldest rows. ``sample(n)`` returns
``n`` rows as a dict of arrays of the same keys. The buffer lives in the driver (or the learner)
and is owned by one thread: no locking.

- `ReplayBuffer`: rows drawn uniformly, with replacement.
- `PrioritizedReplayBuffer`: rows drawn with probability ``p_i**alpha / sum_j p_j**alpha``
  (Schaul et al. 2016); a sample carries ``weights`` (importance weights
  ``(N * P(i)) ** -beta``, divided by their maximum over the buffer) and ``batch_indexes``,
  which ``update_priorities(batch_indexes, td_errors)`` takes back. New rows get the largest
  priority seen so far, so each is replayed at least once with high probability.

``get_state()`` / ``set_state()`` give a picklable dict of the whole buffer, for checkpoints.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Batch = dict[str, np.ndarray]


class ReplayBuffer:
    """A ring of ``capacity`` transitions, sampled uniformly with replacement."""

    def __init__(self, capacity: int = 50_000, seed: int | None = None) -> None:
        if capacity < 1:
            raise ValueError(f"A replay buffer's capacity must be at least 1, not {capacity}.")
        self.capacity = int(capacity)
        self._columns: Batch = {}
        self._head = 0  # the row the next transition goes to
        self._size = 0
        self._added = 0  # transitions ever added
        self._rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self._size

    @property
    def num_added(self) -> int:
        """Transitions added over the buffer's life (evicted ones included)."""
        return self._added

    def add(self, batch: Batch) -> np.ndarray:
        """Append the rows of ``batch`` (a dict of equally long arrays); return the rows'
        indexes in the buffer. A batch longer than the capacity keeps its last rows."""
        sizes = {len(v) for v in batch.values()}
        if len(sizes) != 1:
            raise ValueError(f"A batch's columns must have one length; got "
                             f"{ {k: len(v) for k, v in batch.items()} }.")
        n = sizes.pop()
        if not self._columns:
            self._columns = {k: np.zeros((self.capacity,) + np.shape(v)[1:],
                                         dtype=np.asarray(v).dtype)
                             for k, v in batch.items()}
        elif batch.keys() != self._columns.keys():
            raise ValueError(f"A batch must have the buffer's keys {sorted(self._columns)}; "
                             f"got {sorted(batch)}.")
        skip = max(0, n - self.capacity)
        rows = (self._head + skip + np.arange(n - skip)) % self.capacity
        for key, values in batch.items():
            self._columns[key][rows] = np.asarray(values)[skip:]
        self._head = (self._head + n) % self.capacity
        self._size = min(self.capacity, self._size + n)
        self._added += n
        return rows

    def sample(self, num_items: int) -> Batch:
        """``num_items`` rows drawn uniformly with replacement."""
        self._check_not_empty()
        return self._rows(self._rng.integers(0, self._size, size=num_items))

    def _rows(self, indexes: np.ndarray) -> Batch:
        return {k: v[indexes] for k, v in self._columns.items()}

    def _check_not_empty(self) -> None:
        if not self._size:
            raise ValueError("Cannot sample an empty replay buffer: add transitions first.")

    def get_state(self) -> dict[str, Any]:
        return {"capacity": self.capacity, "columns": {k: v.copy() for k, v in
                                                      self._columns.items()},
                "head": self._head, "size": self._size, "added": self._added,
                "rng": self._rng.bit_generator.state}

    def set_state(self, state: dict[str, Any]) -> None:
        self.capacity = state["capacity"]
        self._columns = {k: v.copy() for k, v in state["columns"].items()}
        self._head, self._size, self._added = state["head"], state["size"], state["added"]
        self._rng.bit_generator.state = state["rng"]


class PrioritizedReplayBuffer(ReplayBuffer):
    """Proportional prioritized replay: see the module docstring."""

    def __init__(self, capacity: int = 50_000, alpha: float = 0.6, beta: float = 0.4,
                 epsilon: float = 1e-6, seed: int | None = None) -> None:
        super().__init__(capacity, seed)
        if alpha < 0:
            raise ValueError(f"alpha must be non-negative, not {alpha}.")
        self.alpha, self.beta, self.epsilon = alpha, beta, epsilon
        # Priorities already raised to alpha; 0 for empty rows, so they are never drawn.
        self._priorities = np.zeros(self.capacity, dtype=np.float64)
        self._max_priority = 1.0

    def add(self, batch: Batch) -> np.ndarray:
        rows = super().add(batch)
        self._priorities[rows] = self._max_priority ** self.alpha
        return rows

    def sample(self, num_items: int, beta: float | None = None) -> Batch:
        """``num_items`` rows drawn by priority, with their ``weights`` and ``batch_indexes``."""
        self._check_not_empty()
        beta = self.beta if beta is None else beta
        cumulative = np.cumsum(self._priorities[:self._size])
        total = cumulative[-1]
        # Stratified: one draw in each of num_items equal slices of the total mass.
        points = (np.arange(num_items) + self._rng.random(num_items)) * (total / num_items)
        indexes = np.minimum(np.searchsorted(cumulative, points, side="right"), self._size - 1)
        probabilities = self._priorities[indexes] / total
        smallest = self._priorities[:self._size].min() / total
        weights = (self._size * probabilities) ** -beta / (self._size * smallest) ** -beta
        batch = self._rows(indexes)
        batch["weights"] = weights.astype(np.float32)
        batch["batch_indexes"] = indexes
        return batch

    def update_priorities(self, indexes: np.ndarray, td_errors: np.ndarray) -> None:
        """Set the priorities of rows ``indexes`` to ``|td_errors| + epsilon``."""
        priorities = np.abs(np.asarray(td_errors, dtype=np.float64)) + self.epsilon
        self._priorities[np.asarray(indexes)] = priorities ** self.alpha
        self._max_priority = max(self._max_priority, float(priorities.max(initial=0.0)))

    def get_state(self) -> dict[str, Any]:
        return {**super().get_state(), "priorities": self._priorities.copy(),
                "max_priority": self._max_priority}

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        self._priorities = state["priorities"].copy()
        self._max_priority = state["max_priority"]


# Ray's names for the buffer types a ``replay_buffer_config["type"]`` may give.
_TYPES: dict[str, type[ReplayBuffer]] = {
    "ReplayBuffer": ReplayBuffer,
    "EpisodeReplayBuffer": ReplayBuffer,
    "MultiAgentReplayBuffer": ReplayBuffer,
    "MultiAgentEpisodeReplayBuffer": ReplayBuffer,
    "PrioritizedReplayBuffer": PrioritizedReplayBuffer,
    "PrioritizedEpisodeReplayBuffer": PrioritizedReplayBuffer,
    "MultiAgentPrioritizedReplayBuffer": PrioritizedReplayBuffer,
    "MultiAgentPrioritizedEpisodeReplayBuffer": PrioritizedReplayBuffer,
}


def make_replay_buffer(config: dict[str, Any], seed: int | None = None) -> ReplayBuffer:
    """The buffer a ``replay_buffer_config`` dict names (``type``: a class or one of Ray's
    names; ``capacity``; ``alpha``/``beta`` for the prioritized one)."""
    kind = config.get("type", "ReplayBuffer")
    if isinstance(kind, str):
        name = kind.rsplit(".", 1)[-1]
        if name not in _TYPES:
            raise ValueError(f"Unknown replay buffer type {kind!r}; use one of "
                             f"{sorted(_TYPES)} or a ReplayBuffer subclass.")
        cls = _TYPES[name]
    else:
        cls = kind
    kwargs: dict[str, Any] = {"capacity": int(config.get("capacity", 50_000)), "seed": seed}
    if issubclass(cls, PrioritizedReplayBuffer):
        kwargs.update({k: config[k] for k in ("alpha", "beta", "epsilon") if k in config})
    return cls(**kwargs)

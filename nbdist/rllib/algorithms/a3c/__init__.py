"""``ray.rllib.algorithms.a3c``: asynchronous advantage actor-critic (see a2c/a2c.py)."""

from nbdist.rllib.algorithms.a2c.a2c import A3C, A3CConfig

__all__ = ["A3C", "A3CConfig"]

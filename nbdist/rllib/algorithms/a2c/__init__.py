"""``ray.rllib.algorithms.a2c`` (dropped by RLlib, kept by nbdist): synchronous advantage
actor-critic; A3C, its asynchronous form, lives beside it (``nbdist.rllib.algorithms.a3c``)."""

from nbdist.rllib.algorithms.a2c.a2c import A2C, A3C, A2CConfig, A2CLearner, A3CConfig

__all__ = ["A2C", "A2CConfig", "A2CLearner", "A3C", "A3CConfig"]

"""``ray.rllib.algorithms.es`` (dropped by RLlib, kept by nbdist): evolution strategies with
rollouts as tasks and the update in the driver."""

from nbdist.rllib.algorithms.es.es import ES, ESConfig, EsConfig
from nbdist.rllib.algorithms.es.es_rl_module import ESRLModule

__all__ = ["ES", "ESConfig", "ESRLModule", "EsConfig"]

"""RLlib's example environments (``ray.rllib.examples.envs``)."""

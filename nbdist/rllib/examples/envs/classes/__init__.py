"""RLlib's example environment classes (``ray.rllib.examples.envs.classes``)."""

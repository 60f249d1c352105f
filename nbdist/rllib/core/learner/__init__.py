"""``Learner``: the update of an algorithm's module from a batch (see learner.py)."""

from nbdist.rllib.core.learner.learner import Learner, TorchLearner

__all__ = ["Learner", "TorchLearner"]

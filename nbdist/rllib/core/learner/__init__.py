"""``Learner``: the update of an algorithm's module from a batch (see learner.py);
``LearnerGroup``: one learner per module the algorithm trains (learner_group.py)."""

from nbdist.rllib.core.learner.learner import Learner, TorchLearner
from nbdist.rllib.core.learner.learner_group import LearnerGroup

__all__ = ["Learner", "LearnerGroup", "TorchLearner"]

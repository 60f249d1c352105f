"""``ray.train.v2.tensorflow``: ``nbdist.train.tensorflow``'s names."""

from nbdist.train.tensorflow import *  # noqa: F403
from nbdist.train.tensorflow import __all__  # noqa: F401

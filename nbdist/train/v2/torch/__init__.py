"""``ray.train.v2.torch``: ``nbdist.train.torch``'s names."""

from nbdist.train.torch import *  # noqa: F403
from nbdist.train.torch import __all__  # noqa: F401

"""``ray.train.v2.api.context``."""

from nbdist.train.context import TrainContext

__all__ = ["TrainContext"]

"""``ray.train.v2.api.callback``."""

from nbdist.train.callback import UserCallback

__all__ = ["UserCallback"]

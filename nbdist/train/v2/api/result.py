"""``ray.train.v2.api.result``."""

from nbdist.train.result import Result

__all__ = ["Result"]

"""``ray.train.v2.api.exceptions``."""

from nbdist.train.errors import TrainingFailedError, WorkerGroupError

__all__ = ["TrainingFailedError", "WorkerGroupError"]

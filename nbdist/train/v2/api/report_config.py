"""``ray.train.v2.api.report_config``."""

from nbdist.train.context import CheckpointUploadMode

__all__ = ["CheckpointUploadMode"]

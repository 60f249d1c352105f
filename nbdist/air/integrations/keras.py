"""``nbdist.air.integrations.keras``: Ray's ``ray.air.integrations.keras`` path to Train's Keras
callback (nbdist/train/tensorflow/keras.py). Importing it imports TensorFlow."""

from __future__ import annotations

from nbdist.train.tensorflow.keras import ReportCheckpointCallback

__all__ = ["ReportCheckpointCallback"]

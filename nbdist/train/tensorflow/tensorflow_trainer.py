"""``ray.train.tensorflow.tensorflow_trainer``."""

from . import TensorflowTrainer

__all__ = ["TensorflowTrainer"]

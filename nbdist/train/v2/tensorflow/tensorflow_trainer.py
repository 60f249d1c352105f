"""``ray.train.v2.tensorflow.tensorflow_trainer``."""

from nbdist.train.tensorflow import TensorflowTrainer

__all__ = ["TensorflowTrainer"]

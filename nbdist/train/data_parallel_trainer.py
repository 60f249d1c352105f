"""``ray.train.data_parallel_trainer``: where Ray 2.60 also exports DataParallelTrainer."""

from .trainer import DataParallelTrainer

__all__ = ["DataParallelTrainer"]

"""``ray.train.torch.torch_trainer``."""

from . import TorchTrainer

__all__ = ["TorchTrainer"]

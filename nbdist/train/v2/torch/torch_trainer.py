"""``ray.train.v2.torch.torch_trainer``."""

from nbdist.train.torch import TorchTrainer

__all__ = ["TorchTrainer"]

"""``ray.train.v2.torch.train_loop_utils``."""

from nbdist.train.torch.train_loop_utils import (
    accelerate,
    backward,
    enable_reproducibility,
    get_device,
    get_devices,
    prepare_data_loader,
    prepare_model,
    prepare_optimizer,
)

__all__ = ["accelerate", "backward", "enable_reproducibility", "get_device", "get_devices",
           "prepare_data_loader", "prepare_model", "prepare_optimizer"]

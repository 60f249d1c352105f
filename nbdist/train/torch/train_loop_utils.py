"""Helpers for a PyTorch training function: the worker's device, DDP wrapping, a data
loader that reads only this rank's share of the dataset (a ``DistributedSampler`` per rank),
and seeding for reproducible runs."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler

from ..context import get_context


def get_device() -> torch.device:
    """This worker's device: its GPU (by local rank) when the run uses GPUs, else the CPU."""
    context = get_context()
    if context.use_gpu and torch.cuda.is_available():
        return torch.device("cuda", context.local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def get_devices() -> list[torch.device]:
    """This worker's devices (Ray's list form of `get_device`): one per worker here."""
    return [get_device()]


def enable_reproducibility(seed: int = 0) -> None:
    """Seed torch, Python and numpy with ``seed`` and make torch choose deterministic
    algorithms (an operation without one then raises), as Ray's does."""
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    # cuBLAS needs this for deterministic results on GPUs; harmless on a CPU.
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"


def accelerate(amp: bool = False) -> None:
    """Ray's switch for automatic mixed precision: off is the default and nothing to do;
    on is not supported (use ``torch.autocast`` and ``torch.amp.GradScaler`` directly)."""
    if amp:
        raise NotImplementedError(
            "train.torch.accelerate(amp=True): automatic mixed precision is not supported; "
            "use torch.autocast and torch.amp.GradScaler in the training function.")


def prepare_optimizer(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """The optimizer as it is: without mixed precision (`accelerate`) there is no gradient
    scaling to add."""
    return optimizer


def backward(tensor: torch.Tensor) -> None:
    """``tensor.backward()`` (Ray's hook for scaled gradients under mixed precision)."""
    tensor.backward()


def prepare_model(model: torch.nn.Module, move_to_device: bool = True,
                  parallel_strategy: str | None = "ddp",
                  parallel_strategy_kwargs: dict[str, Any] | None = None) -> torch.nn.Module:
    """``model`` on this worker's device, wrapped in DistributedDataParallel when the group
    has more than one worker (gradients are averaged across ranks on every backward)."""
    device = get_device()
    if move_to_device:
        model = model.to(device)
    if parallel_strategy is None or get_context().get_world_size() < 2:
        return model
    if parallel_strategy != "ddp":
        raise ValueError(f"parallel_strategy={parallel_strategy!r}: only 'ddp' or None.")
    kwargs = dict(parallel_strategy_kwargs or {})
    if device.type == "cuda":
        kwargs.setdefault("device_ids", [device])
        kwargs.setdefault("output_device", device)
    return torch.nn.parallel.DistributedDataParallel(model, **kwargs)


def prepare_data_loader(data_loader: DataLoader, add_dist_sampler: bool = True,
                        move_to_device: bool = True, auto_transfer: bool = True) -> Any:
    """``data_loader`` rebuilt with a DistributedSampler, so each rank reads its own share
    (shuffled if the loader shuffled); call ``loader.sampler.set_epoch(epoch)`` per epoch to
    reshuffle. Batches are moved to this worker's device when it is not the CPU."""
    context = get_context()
    if add_dist_sampler and context.get_world_size() > 1:
        shuffle = isinstance(data_loader.sampler, RandomSampler)
        sampler: DistributedSampler[Any] = DistributedSampler(
            data_loader.dataset, num_replicas=context.world_size,
            rank=context.world_rank, shuffle=shuffle)
        data_loader = DataLoader(
            data_loader.dataset, batch_size=data_loader.batch_size, sampler=sampler,
            num_workers=data_loader.num_workers, collate_fn=data_loader.collate_fn,
            pin_memory=data_loader.pin_memory, drop_last=data_loader.drop_last,
            timeout=data_loader.timeout, worker_init_fn=data_loader.worker_init_fn)
    device = get_device()
    if move_to_device and device.type != "cpu":
        return _DeviceLoader(data_loader, device)
    return data_loader


class _DeviceLoader:
    """A data loader whose batches arrive on ``device``; its other attributes are the loader's."""

    def __init__(self, loader: DataLoader, device: torch.device) -> None:
        self._loader = loader
        self._device = device

    def __len__(self) -> int:
        return len(self._loader)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def __iter__(self) -> Iterator[Any]:
        for batch in self._loader:
            yield _to(batch, self._device)


def _to(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device, non_blocking=True)
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    return value

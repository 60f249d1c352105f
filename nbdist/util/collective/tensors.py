"""numpy arrays and CPU torch tensors as flat, writable numpy views (in-place results).

A C-contiguous numpy array, or a contiguous CPU torch tensor (through ``Tensor.numpy()``,
which shares its memory), is used directly. Anything else (a strided view, a non-contiguous
tensor) is copied into a contiguous buffer and the result copied back when the operation ends.
torch is imported only if the caller passes a tensor, so numpy users never pay for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def _is_torch(value: Any) -> bool:
    return type(value).__module__.startswith("torch")


class Flat:
    """A flat writable view of a tensor, and how to write it back (``commit``)."""

    def __init__(self, array: np.ndarray, write_back: Callable[[np.ndarray], None] | None,
                 shape: tuple[int, ...]) -> None:
        self.array, self.shape = array, shape
        self._write_back = write_back

    @property
    def dtype(self) -> np.dtype:
        return self.array.dtype

    def commit(self) -> None:
        if self._write_back is not None:
            self._write_back(self.array)


def flat(tensor: Any, what: str = "tensor") -> Flat:
    if _is_torch(tensor):
        return _flat_torch(tensor, what)
    if not isinstance(tensor, np.ndarray):
        raise TypeError(f"The {what} must be a numpy array or a CPU torch tensor, "
                        f"not {type(tensor).__name__}.")
    if not tensor.flags.writeable:
        raise ValueError(f"The {what} is read-only (arrays returned by nbdist.get are): "
                         f"collective operations write their result in place; pass a copy "
                         f"(array.copy()).")
    if tensor.flags.c_contiguous:
        return Flat(tensor.reshape(-1), None, tensor.shape)
    work = np.ascontiguousarray(tensor).reshape(-1)

    def back(result: np.ndarray) -> None:
        tensor[...] = result.reshape(tensor.shape)

    return Flat(work, back, tensor.shape)


def _flat_torch(tensor: Any, what: str) -> Flat:
    if tensor.device.type != "cpu":
        raise ValueError(f"The {what} is on {tensor.device}: nbdist collective groups work on "
                         f"CPU tensors (move it with .cpu(), or use torch.distributed with NCCL).")
    shape = tuple(tensor.shape)
    data = tensor.detach()
    try:
        if data.is_contiguous():
            return Flat(data.numpy().reshape(-1), None, shape)
        work = data.contiguous().numpy().reshape(-1)
    except TypeError as exc:  # dtypes numpy lacks (bfloat16)
        raise TypeError(f"The {what} has dtype {tensor.dtype}, which has no numpy "
                        f"equivalent: {exc}") from None

    def back(result: np.ndarray) -> None:
        import torch

        data.copy_(torch.from_numpy(result.reshape(shape)))

    return Flat(work, back, shape)

"""``Learner``: the module's optimizer and its update loop, in the driver.

An algorithm turns its episodes into a batch (a dict of equal-length torch tensors, built by
the algorithm, e.g. PPO's advantages) and calls ``update(batch)``: ``num_epochs`` passes over
the batch in shuffled minibatches of ``minibatch_size`` rows, each a forward pass
(``module.forward_train``), the algorithm's ``compute_loss_for_module``, a backward pass, the
gradient clipped (``grad_clip``, by global norm) and an optimizer step. It returns the mean of
each statistic the loss reported, as RLlib's ``learners/<module_id>/...`` entries.

Subclass it and implement ``compute_loss_for_module(module_id, config, batch, fwd_out)``,
returning ``(loss, {name: float})``. ``after_gradient_based_update`` runs once per ``update``
(PPO adapts its KL coefficient there).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from nbdist.rllib.core import DEFAULT_MODULE_ID


class Learner:
    framework = "torch"

    def __init__(self, *, config: Any, module: Any, module_id: str = DEFAULT_MODULE_ID) -> None:
        self.config = config
        self.module = module
        self.module_id = module_id
        self.optimizer = self.configure_optimizer()
        self.num_updates = 0

    def configure_optimizer(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.module.parameters(), lr=float(self.config.lr),
                                **(self.config.optimizer or {}))

    def compute_loss_for_module(self, module_id: str, config: Any, batch: dict[str, Any],
                                fwd_out: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        raise NotImplementedError(f"{type(self).__name__} must implement "
                                  "compute_loss_for_module")

    def after_gradient_based_update(self, stats: dict[str, float]) -> dict[str, float]:
        return stats

    def update(self, batch: dict[str, torch.Tensor], *, minibatch_size: int | None = None,
               num_epochs: int = 1, shuffle: bool = True) -> dict[str, float]:
        size = len(next(iter(batch.values())))
        minibatch = int(minibatch_size or size)
        sums: dict[str, float] = {}
        count = 0
        self.module.train()
        for _ in range(max(1, int(num_epochs))):
            order = torch.randperm(size) if shuffle else torch.arange(size)
            for start in range(0, size, minibatch):
                rows = order[start:start + minibatch]
                mb = {k: v[rows] for k, v in batch.items()}
                fwd_out = self.module.forward_train(mb)
                loss, stats = self.compute_loss_for_module(self.module_id, self.config, mb,
                                                           fwd_out)
                self.optimizer.zero_grad()
                loss.backward()
                if self.config.grad_clip:
                    norm = torch.nn.utils.clip_grad_norm_(self.module.parameters(),
                                                          float(self.config.grad_clip))
                    stats["gradients_maxabs_after_clipping"] = float(norm)
                self.optimizer.step()
                for key, value in stats.items():
                    sums[key] = sums.get(key, 0.0) + float(value)
                count += 1
        self.module.eval()
        self.num_updates += 1
        stats = {k: v / max(1, count) for k, v in sums.items()}
        stats["num_module_steps_trained"] = float(size * max(1, int(num_epochs)))
        stats["num_minibatch_updates"] = float(count)
        return self.after_gradient_based_update(stats)

    # --- one data-parallel step (the learner actors of a LearnerGroup) --------------------
    def compute_gradients(self, minibatch: dict[str, torch.Tensor]) -> tuple[list[Any],
                                                                          dict[str, float]]:
        """The loss's gradients on ``minibatch`` (numpy arrays, one per parameter; None for a
        parameter the loss does not reach) and its statistics; nothing is applied."""
        self.module.train()
        fwd_out = self.module.forward_train(minibatch)
        loss, stats = self.compute_loss_for_module(self.module_id, self.config, minibatch,
                                                   fwd_out)
        self.optimizer.zero_grad()
        loss.backward()
        grads = [None if p.grad is None else p.grad.detach().numpy().copy()
                 for p in self.module.parameters()]
        self.module.eval()
        return grads, {k: float(v) for k, v in stats.items()}

    def apply_gradients(self, grads: list[Any]) -> dict[str, float]:
        """Set the parameters' gradients to ``grads``, clip them (``grad_clip``) and take an
        optimizer step."""
        for param, grad in zip(self.module.parameters(), grads, strict=True):
            param.grad = None if grad is None else torch.tensor(grad)
        stats: dict[str, float] = {}
        if self.config.grad_clip:
            norm = torch.nn.utils.clip_grad_norm_(self.module.parameters(),
                                                  float(self.config.grad_clip))
            stats["gradients_maxabs_after_clipping"] = float(norm)
        self.optimizer.step()
        return stats

    def get_state(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict(), "num_updates": self.num_updates}

    def set_state(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.num_updates = int(state.get("num_updates", 0))


TorchLearner = Learner


def to_tensor(values: Any, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.as_tensor(np.asarray(values), dtype=dtype)

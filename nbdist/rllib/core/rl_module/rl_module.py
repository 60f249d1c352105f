"""The torch modules an algorithm trains and its env runners act with.

An ``RLModule`` is a ``torch.nn.Module`` built from the env's spaces and the config's
``model_config`` dict (RLlib's keys: ``fcnet_hiddens``, ``fcnet_activation``,
``vf_share_layers``, ``head_fcnet_hiddens``). Its contract with the rest of nbdist.rllib:

    forward_inference(batch)     {"action_dist_inputs": ...} for greedy actions (batch["obs"])
    forward_exploration(batch)   the same while sampling (by default: forward_inference)
    forward_train(batch)         what the learner's loss needs (by default: forward_exploration)
    compute_actions(obs, explore, t)
                                 numpy observations in, (numpy actions, {extra outputs}) out:
                                 what an env runner calls each step; the extras (e.g.
                                 "action_logp", "vf_preds") go into the episode's
                                 extra_model_outputs. Override it for other exploration
                                 (DQN's epsilon-greedy reads ``t``, the runner's env steps).
    get_state() / set_state(s)   plain numpy arrays (what is put in the object store and
                                 broadcast to the runners, and what a checkpoint holds)

``RLModuleSpec(module_class=..., observation_space=..., action_space=..., model_config=...)``
is the picklable recipe a runner builds its own copy from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "linear": nn.Identity, None: nn.Identity,
               "elu": nn.ELU, "swish": nn.SiLU, "silu": nn.SiLU}

DEFAULT_MODEL_CONFIG: dict[str, Any] = {
    "fcnet_hiddens": [256, 256],
    "fcnet_activation": "tanh",
    "vf_share_layers": False,
    "head_fcnet_hiddens": [],
    "head_fcnet_activation": "relu",
    "free_log_std": False,
}


def build_mlp(inputs: int, hiddens: list[int], activation: str | None,
              outputs: int | None = None) -> nn.Sequential:
    """Linear layers of sizes ``hiddens`` with ``activation`` between, then an optional linear
    output layer of ``outputs`` units."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; one of {sorted(map(str, ACTIVATIONS))}")
    layers: list[nn.Module] = []
    size = inputs
    for hidden in hiddens:
        layers += [nn.Linear(size, hidden), ACTIVATIONS[activation]()]
        size = hidden
    if outputs is not None:
        layers.append(nn.Linear(size, outputs))
    return nn.Sequential(*layers)


def flat_size(space: Any) -> int:
    shape = getattr(space, "shape", None)
    if shape is None or shape == ():
        n = getattr(space, "n", None)
        if n is not None:  # a Discrete observation: one-hot
            return int(n)
        raise ValueError(f"nbdist.rllib's default models take Box or Discrete observations, "
                         f"not {space!r}")
    return int(np.prod(shape))


def is_discrete(space: Any) -> bool:
    return hasattr(space, "n") and getattr(space, "shape", ()) == ()


def action_distribution(space: Any, inputs: torch.Tensor) -> torch.distributions.Distribution:
    """The action distribution the module's ``action_dist_inputs`` parameterise: categorical
    logits for a Discrete space, a diagonal Gaussian's mean and log-std for a Box."""
    if is_discrete(space):
        return torch.distributions.Categorical(logits=inputs)
    mean, log_std = torch.chunk(inputs, 2, dim=-1)
    return torch.distributions.Independent(
        torch.distributions.Normal(mean, torch.exp(log_std.clamp(-20.0, 2.0))), 1)


def sample_categorical(logits: np.ndarray, explore: bool) -> tuple[np.ndarray, np.ndarray]:
    """Actions drawn from categorical ``logits`` [B, n] (the most likely ones unless
    ``explore``) and their log-probabilities; the uniform draws come from torch's generator,
    so ``torch.manual_seed`` seeds them."""
    logits = logits.astype(np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    logp_all = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    if explore:
        u = torch.rand(len(logits), 1, dtype=torch.float64).numpy()
        cdf = np.cumsum(np.exp(logp_all), axis=-1)
        actions = np.minimum((u > cdf).sum(axis=-1), logits.shape[-1] - 1)
    else:
        actions = logits.argmax(axis=-1)
    logp = logp_all[np.arange(len(logits)), actions].astype(np.float32)
    return actions.astype(np.int64), logp


class RLModule(nn.Module):
    """Base of every module (see the module docstring for the contract)."""

    framework = "torch"

    def __init__(self, observation_space: Any = None, action_space: Any = None,
                 model_config: dict[str, Any] | None = None, inference_only: bool = False,
                 **_: Any) -> None:
        super().__init__()
        self.observation_space = observation_space
        self.action_space = action_space
        self.model_config = {**DEFAULT_MODEL_CONFIG, **(model_config or {})}
        self.inference_only = inference_only
        self.setup()

    def setup(self) -> None:
        """Build the layers (``self.observation_space``, ``self.action_space`` and
        ``self.model_config`` are set)."""

    def preprocess(self, obs: Any) -> torch.Tensor:
        """Observations as a float tensor of shape [B, features] (Discrete ones one-hot)."""
        tensor = torch.as_tensor(np.asarray(obs))
        if is_discrete(self.observation_space):
            return nn.functional.one_hot(tensor.long(), int(self.observation_space.n)).float()
        return tensor.float().reshape(tensor.shape[0], -1)

    def forward_inference(self, batch: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def forward_exploration(self, batch: dict[str, Any]) -> dict[str, Any]:
        return self.forward_inference(batch)

    def forward_train(self, batch: dict[str, Any]) -> dict[str, Any]:
        return self.forward_exploration(batch)

    def forward(self, batch: dict[str, Any]) -> dict[str, Any]:
        return self.forward_train(batch)

    def get_inference_action_dist_cls(self) -> Any:
        return lambda inputs: action_distribution(self.action_space, inputs)

    get_exploration_action_dist_cls = get_inference_action_dist_cls
    get_train_action_dist_cls = get_inference_action_dist_cls

    @torch.no_grad()
    def compute_actions(self, obs: Any, explore: bool = True,
                        t: int = 0) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        batch = {"obs": self.preprocess(obs)}
        out = self.forward_exploration(batch) if explore else self.forward_inference(batch)
        if is_discrete(self.action_space):  # numpy: a fraction of torch.distributions' cost
            actions_np, logp = sample_categorical(out["action_dist_inputs"].numpy(), explore)
            extras = {"action_logp": logp}
            if "vf_preds" in out:
                extras["vf_preds"] = out["vf_preds"].numpy()
            return actions_np, extras
        dist = action_distribution(self.action_space, out["action_dist_inputs"])
        if explore:
            actions = dist.sample()
        elif is_discrete(self.action_space):
            actions = out["action_dist_inputs"].argmax(-1)
        else:
            actions = torch.chunk(out["action_dist_inputs"], 2, dim=-1)[0]
        extras = {"action_logp": dist.log_prob(actions).numpy()}
        if "vf_preds" in out:
            extras["vf_preds"] = out["vf_preds"].numpy()
        return actions.numpy(), extras

    def get_state(self, inference_only: bool = False) -> dict[str, Any]:
        return {k: v.detach().cpu().numpy().copy() for k, v in self.state_dict().items()}

    def set_state(self, state: dict[str, Any]) -> None:
        self.load_state_dict({k: torch.as_tensor(np.array(v)) for k, v in state.items()})


TorchRLModule = RLModule


class ActorCriticMLPModule(RLModule):
    """An MLP policy (``action_dist_inputs``) and an MLP value function (``vf_preds``), with
    separate encoders or one shared (``vf_share_layers``): PPO's and A2C's default module."""

    def setup(self) -> None:
        cfg = self.model_config
        inputs = flat_size(self.observation_space)
        hiddens = list(cfg["fcnet_hiddens"])
        activation = cfg["fcnet_activation"]
        head = list(cfg.get("head_fcnet_hiddens") or [])
        head_act = cfg.get("head_fcnet_activation", "relu")
        space = self.action_space
        outputs = int(space.n) if is_discrete(space) else 2 * int(np.prod(space.shape))
        self.encoder = build_mlp(inputs, hiddens, activation)
        size = hiddens[-1] if hiddens else inputs
        self.pi = build_mlp(size, head, head_act, outputs)
        self.vf_encoder = None if cfg["vf_share_layers"] else build_mlp(inputs, hiddens,
                                                                         activation)
        self.vf = build_mlp(size, head, head_act, 1)
        nn.init.orthogonal_(self.pi[-1].weight, gain=0.01)
        nn.init.zeros_(self.pi[-1].bias)

    def forward_inference(self, batch: dict[str, Any]) -> dict[str, Any]:
        return {"action_dist_inputs": self.pi(self.encoder(batch["obs"]))}

    def forward_exploration(self, batch: dict[str, Any]) -> dict[str, Any]:
        return self.forward_inference(batch)  # the learner computes the values itself

    def forward_train(self, batch: dict[str, Any]) -> dict[str, Any]:
        features = self.encoder(batch["obs"])
        vf_features = features if self.vf_encoder is None else self.vf_encoder(batch["obs"])
        return {"action_dist_inputs": self.pi(features),
                "vf_preds": self.vf(vf_features).squeeze(-1)}

    def compute_values(self, batch: dict[str, Any]) -> torch.Tensor:
        encoder = self.encoder if self.vf_encoder is None else self.vf_encoder
        return self.vf(encoder(batch["obs"])).squeeze(-1)


@dataclass
class RLModuleSpec:
    """The recipe of a module: its class, spaces and ``model_config`` (picklable)."""
    module_class: type[RLModule] | None = None
    observation_space: Any = None
    action_space: Any = None
    inference_only: bool = False
    model_config: dict[str, Any] = field(default_factory=dict)
    catalog_class: Any = None
    load_state_path: str | None = None

    def build(self) -> RLModule:
        if self.module_class is None:
            raise ValueError("RLModuleSpec.module_class is not set")
        return self.module_class(observation_space=self.observation_space,
                                 action_space=self.action_space,
                                 model_config=self.model_config,
                                 inference_only=self.inference_only)

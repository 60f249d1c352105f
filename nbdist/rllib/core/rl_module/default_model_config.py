"""``DefaultModelConfig``: the settings of RLlib's default models, as a dataclass
(``config.rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[64]))``; a plain dict with
the same keys works too)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class DefaultModelConfig:
    fcnet_hiddens: list[int] = field(default_factory=lambda: [256, 256])
    fcnet_activation: str = "tanh"
    vf_share_layers: bool = False
    head_fcnet_hiddens: list[int] = field(default_factory=list)
    head_fcnet_activation: str = "relu"
    free_log_std: bool = False

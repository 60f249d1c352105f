"""``MultiRLModule``: the modules of a multi-agent algorithm, one per module id (policy), as
RLlib's new API stack names it.

``multi[module_id]`` is that module (an ``RLModule``); ``get_state()`` is ``{module_id:
module state}`` (what the driver puts in the object store for its env runners and what a
checkpoint holds), ``set_state`` sets the modules it names. ``MultiRLModuleSpec(
rl_module_specs={module_id: RLModuleSpec})`` is the picklable recipe.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from nbdist.rllib.core.rl_module.rl_module import RLModule, RLModuleSpec


class MultiRLModule(nn.Module):
    framework = "torch"

    def __init__(self, rl_modules: dict[str, RLModule] | None = None, **_: Any) -> None:
        super().__init__()
        self._rl_modules = nn.ModuleDict(dict(rl_modules or {}))

    def __getitem__(self, module_id: str) -> RLModule:
        if module_id not in self._rl_modules:
            raise KeyError(f"no module {module_id!r} in this MultiRLModule "
                           f"(it has {sorted(self._rl_modules)})")
        return self._rl_modules[module_id]

    def __contains__(self, module_id: object) -> bool:
        return isinstance(module_id, str) and module_id in self._rl_modules

    def __iter__(self) -> Iterator[str]:
        return iter(self._rl_modules)

    def __len__(self) -> int:
        return len(self._rl_modules)

    def keys(self) -> list[str]:
        return list(self._rl_modules)

    def items(self) -> list[tuple[str, RLModule]]:
        return [(k, self[k]) for k in self._rl_modules]

    def get_state(self, module_ids: Any = None,
                  inference_only: bool = False) -> dict[str, Any]:
        ids = list(self._rl_modules) if module_ids is None else list(module_ids)
        return {mid: self[mid].get_state() for mid in ids}

    def set_state(self, state: dict[str, Any]) -> None:
        for mid, module_state in state.items():
            if mid in self._rl_modules:
                self[mid].set_state(module_state)

    def forward(self, batch: dict[str, Any]) -> dict[str, Any]:
        return {mid: self[mid].forward_train(b) for mid, b in batch.items()}


@dataclass
class MultiRLModuleSpec:
    """The recipe of a ``MultiRLModule``: one ``RLModuleSpec`` per module id."""
    multi_rl_module_class: type[MultiRLModule] = MultiRLModule
    rl_module_specs: dict[str, RLModuleSpec] = field(default_factory=dict)
    inference_only: bool = False
    load_state_path: str | None = None

    def build(self) -> MultiRLModule:
        return self.multi_rl_module_class(
            {mid: spec.build() for mid, spec in self.rl_module_specs.items()})

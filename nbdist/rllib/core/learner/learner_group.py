"""``LearnerGroup``: an algorithm's learners, one ``Learner`` per module it trains.

``update({module_id: batch}, minibatch_size=, num_epochs=)`` runs each module's update and
returns ``{module_id: stats}`` (RLlib's ``learners/<module_id>/...``). A module whose id is not
in the dict (a policy no agent was mapped to, or one not in ``policies_to_train``) is not
touched. With ``num_learners=0`` the learners run in the driver on the algorithm's own
modules.
"""

from __future__ import annotations

from typing import Any

from nbdist.rllib.core import DEFAULT_MODULE_ID
from nbdist.rllib.core.rl_module.multi_rl_module import MultiRLModule


def module_ids(module: Any) -> list[str]:
    return list(module.keys()) if isinstance(module, MultiRLModule) else [DEFAULT_MODULE_ID]


def sub_module(module: Any, module_id: str) -> Any:
    return module[module_id] if isinstance(module, MultiRLModule) else module


class LearnerGroup:
    def __init__(self, *, config: Any, module: Any, learner_class: type) -> None:
        self.config = config
        self.module = module
        self.learner_class = learner_class
        self._learners = {mid: learner_class(config=config, module=sub_module(module, mid),
                                             module_id=mid)
                          for mid in module_ids(module)}

    @property
    def is_local(self) -> bool:
        return True

    def __getitem__(self, module_id: str) -> Any:
        return self._learners[module_id]

    def keys(self) -> list[str]:
        return list(self._learners)

    def update(self, batches: dict[str, Any], *, minibatch_size: int | None = None,
               num_epochs: int = 1, shuffle: bool = True) -> dict[str, dict[str, float]]:
        return {mid: self._learners[mid].update(batch, minibatch_size=minibatch_size,
                                                num_epochs=num_epochs, shuffle=shuffle)
                for mid, batch in batches.items()}

    def get_weights(self) -> dict[str, Any]:
        return self.module.get_state()

    def get_state(self) -> dict[str, Any]:
        return {mid: learner.get_state() for mid, learner in self._learners.items()}

    def set_state(self, state: dict[str, Any]) -> None:
        for mid, learner_state in state.items():
            if mid in self._learners:
                self._learners[mid].set_state(learner_state)

    def stop(self) -> None:
        pass

"""``SingleAgentEpisode``: one agent's trajectory (or a chunk of it), as RLlib's new API stack
names it.

An episode holds ``len(observations) == len(actions) + 1``: the observation before each action
and the one after the last. An env runner that stops sampling in the middle of an episode hands
out the chunk sampled so far (``is_done`` False) and keeps going with a successor chunk
(`cut`) that starts at the last observation and keeps the episode's ``id_``: a learner that
bootstraps from the chunk's last observation sees the same trajectory either way.
``extra_model_outputs`` holds, per key, one value per action (the module's log-probability of
the action, its value estimate, ...).
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np


class SingleAgentEpisode:
    def __init__(self, id_: str | None = None, *, observations: list[Any] | None = None,
                 infos: list[Any] | None = None, actions: list[Any] | None = None,
                 rewards: list[float] | None = None, terminated: bool = False,
                 truncated: bool = False, extra_model_outputs: dict[str, list[Any]] | None = None,
                 t_started: int = 0, observation_space: Any = None,
                 action_space: Any = None) -> None:
        self.id_ = id_ or uuid.uuid4().hex
        self.observations: list[Any] = list(observations or [])
        self.infos: list[Any] = list(infos or [{} for _ in self.observations])
        self.actions: list[Any] = list(actions or [])
        self.rewards: list[float] = list(rewards or [])
        self.is_terminated = terminated
        self.is_truncated = truncated
        self.extra_model_outputs: dict[str, list[Any]] = {
            k: list(v) for k, v in (extra_model_outputs or {}).items()}
        self.t_started = t_started
        self.observation_space = observation_space
        self.action_space = action_space

    # Building, as an env runner does.
    def add_env_reset(self, observation: Any, infos: dict[str, Any] | None = None) -> None:
        assert not self.observations, "add_env_reset starts an episode: it has observations"
        self.observations.append(observation)
        self.infos.append(infos or {})

    def add_env_step(self, observation: Any, action: Any, reward: float,
                     infos: dict[str, Any] | None = None, *, terminated: bool = False,
                     truncated: bool = False,
                     extra_model_outputs: dict[str, Any] | None = None) -> None:
        assert self.observations, "add_env_reset first"
        assert not self.is_done, "this episode is done; start a new one"
        self.observations.append(observation)
        self.infos.append(infos or {})
        self.actions.append(action)
        self.rewards.append(float(reward))
        for key, value in (extra_model_outputs or {}).items():
            self.extra_model_outputs.setdefault(key, []).append(value)
        self.is_terminated = bool(terminated)
        self.is_truncated = bool(truncated)

    def cut(self) -> SingleAgentEpisode:
        """The successor chunk: same ``id_``, starting at this chunk's last observation."""
        assert not self.is_done, "a done episode has no successor"
        return SingleAgentEpisode(self.id_, observations=[self.observations[-1]],
                                  infos=[self.infos[-1]], t_started=self.t,
                                  observation_space=self.observation_space,
                                  action_space=self.action_space)

    # Reading.
    @property
    def is_done(self) -> bool:
        return self.is_terminated or self.is_truncated

    @property
    def t(self) -> int:
        """The env step this chunk ends at (counted from the episode's start)."""
        return self.t_started + len(self.actions)

    def __len__(self) -> int:
        return len(self.actions)

    def env_steps(self) -> int:
        return len(self.actions)

    def agent_steps(self) -> int:
        return len(self.actions)

    def get_return(self) -> float:
        return float(sum(self.rewards))

    def get_observations(self, indices: Any = None) -> Any:
        return self._get(self.observations, indices)

    def get_actions(self, indices: Any = None) -> Any:
        return self._get(self.actions, indices)

    def get_rewards(self, indices: Any = None) -> Any:
        return self._get(self.rewards, indices)

    def get_infos(self, indices: Any = None) -> Any:
        return self.infos if indices is None else self.infos[indices]

    def get_extra_model_outputs(self, key: str, indices: Any = None) -> Any:
        return self._get(self.extra_model_outputs[key], indices)

    @staticmethod
    def _get(values: list[Any], indices: Any) -> Any:
        array = np.asarray(values)
        return array if indices is None else array[indices]

    def get_state(self) -> dict[str, Any]:
        return {"id_": self.id_, "observations": self.observations, "infos": self.infos,
                "actions": self.actions, "rewards": self.rewards,
                "terminated": self.is_terminated, "truncated": self.is_truncated,
                "extra_model_outputs": self.extra_model_outputs, "t_started": self.t_started}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SingleAgentEpisode:
        return cls(**state)

    def __repr__(self) -> str:
        return (f"SingleAgentEpisode(id_={self.id_[:8]}, len={len(self)}, "
                f"return={self.get_return():.1f}, done={self.is_done})")

"""``MultiAgentEpisode``: one episode of a ``MultiAgentEnv`` (or a chunk of it), as RLlib's new
API stack names it: one ``SingleAgentEpisode`` per agent (``agent_episodes``), each agent's
module (``module_for``), and the env steps it spans.

An agent's episode holds what that agent saw and did: the observation it acted on, its action
and the reward it got until it next observed (in a turn-based game, what the other players'
moves brought it too). A learner groups the agent episodes by module
(``get_agent_episodes_by_module``) and trains each module on its own agents' trajectories.
"""

from __future__ import annotations

import uuid
from typing import Any

from nbdist.rllib.env.single_agent_episode import SingleAgentEpisode


class MultiAgentEpisode:
    def __init__(self, id_: str | None = None, *,
                 agent_episodes: dict[Any, SingleAgentEpisode] | None = None,
                 agent_to_module_mapping_fn: Any = None,
                 agent_to_module: dict[Any, str] | None = None, env_t_started: int = 0,
                 env_t: int = 0) -> None:
        self.id_ = id_ or uuid.uuid4().hex
        self.agent_episodes: dict[Any, SingleAgentEpisode] = dict(agent_episodes or {})
        self.agent_to_module_mapping_fn = agent_to_module_mapping_fn
        self._agent_to_module: dict[Any, str] = dict(agent_to_module or {})
        self.env_t_started = env_t_started
        self.env_t = env_t
        self.is_terminated = False
        self.is_truncated = False

    @property
    def agent_ids(self) -> set[Any]:
        return set(self.agent_episodes)

    @property
    def agent_to_module_map(self) -> dict[Any, str]:
        return dict(self._agent_to_module)

    def module_for(self, agent_id: Any) -> str:
        """The module that acts for ``agent_id`` in this episode (the mapping fn is asked once
        per agent and episode)."""
        if agent_id not in self._agent_to_module:
            fn = self.agent_to_module_mapping_fn
            self._agent_to_module[agent_id] = str(fn(agent_id, self))
        return self._agent_to_module[agent_id]

    @property
    def is_done(self) -> bool:
        return self.is_terminated or self.is_truncated

    def __len__(self) -> int:
        return self.env_t - self.env_t_started

    def env_steps(self) -> int:
        return len(self)

    def agent_steps(self) -> int:
        return sum(len(e) for e in self.agent_episodes.values())

    def get_return(self) -> float:
        """The rewards of every agent in this chunk, summed."""
        return float(sum(e.get_return() for e in self.agent_episodes.values()))

    def get_agent_episodes_by_module(self) -> dict[str, list[SingleAgentEpisode]]:
        out: dict[str, list[SingleAgentEpisode]] = {}
        for agent_id, episode in self.agent_episodes.items():
            out.setdefault(self.module_for(agent_id), []).append(episode)
        return out

    def __getstate__(self) -> dict[str, Any]:
        state = dict(vars(self))
        state["agent_to_module_mapping_fn"] = None  # the map is filled; the fn stays home
        return state

    def __repr__(self) -> str:
        return (f"MultiAgentEpisode(id_={self.id_[:8]}, agents={sorted(map(str, self.agent_ids))}, "
                f"len={len(self)}, return={self.get_return():.1f}, done={self.is_done})")

"""``MultiAgentEnv``: an env of several agents, as Ray 2.60's RLlib defines it.

Every call speaks in dicts keyed by agent id::

    obs, infos = env.reset(seed=None, options=None)         # {agent_id: obs}, {agent_id: info}
    obs, rewards, terminateds, truncateds, infos = env.step({agent_id: action, ...})

``obs`` holds the agents that act next (all of them in a simultaneous game, one in a turn-based
one); ``terminateds`` and ``truncateds`` carry the special key ``"__all__"``, True when the
whole episode is over. ``agents`` lists the agents alive now, ``possible_agents`` every agent
the env may have; ``observation_spaces`` / ``action_spaces`` map agent ids to their spaces
(``get_observation_space(agent_id)`` / ``get_action_space(agent_id)`` read them).

``make_multi_agent(env_name_or_creator)`` turns a single-agent env into a multi-agent one of
``config["num_agents"]`` independent copies (agents ``0 .. n-1``; an agent whose copy is done
leaves the episode, which ends when all have).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

ALL = "__all__"


class MultiAgentEnv:
    """Base of multi-agent envs (see the module docstring)."""

    observation_space: Any = None
    action_space: Any = None
    metadata: dict[str, Any] = {"render.modes": []}
    render_mode: str | None = None

    def __init__(self) -> None:
        if not hasattr(self, "observation_spaces"):
            self.observation_spaces: dict[Any, Any] = {}
        if not hasattr(self, "action_spaces"):
            self.action_spaces: dict[Any, Any] = {}
        if not hasattr(self, "agents"):
            self.agents: list[Any] = []
        if not hasattr(self, "possible_agents"):
            self.possible_agents: list[Any] = []

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict[Any, Any], dict[Any, Any]]:
        raise NotImplementedError

    def step(self, action_dict: dict[Any, Any]) -> tuple[dict[Any, Any], dict[Any, float],
                                                        dict[Any, bool], dict[Any, bool],
                                                        dict[Any, Any]]:
        raise NotImplementedError

    def render(self) -> Any:
        return None

    def close(self) -> None:
        pass

    def get_observation_space(self, agent_id: Any) -> Any:
        return self._space_of(agent_id, "observation")

    def get_action_space(self, agent_id: Any) -> Any:
        return self._space_of(agent_id, "action")

    def _space_of(self, agent_id: Any, kind: str) -> Any:
        """The agent's space: from ``{kind}_spaces``, else a Dict ``{kind}_space`` keyed by
        agent, else the one ``{kind}_space`` every agent shares."""
        spaces = getattr(self, f"{kind}_spaces", None)
        if spaces and agent_id in spaces:
            return spaces[agent_id]
        space = getattr(self, f"{kind}_space")
        if isinstance(space, gym.spaces.Dict) and agent_id in space.spaces:
            return space[agent_id]
        return space

    @property
    def num_agents(self) -> int:
        return len(self.agents)

    @property
    def max_num_agents(self) -> int:
        return len(self.possible_agents)

    def get_agent_ids(self) -> set[Any]:
        return set(self.possible_agents or self.agents)

    @property
    def unwrapped(self) -> MultiAgentEnv:
        return self


def make_multi_agent(env_name_or_creator: Any) -> type[MultiAgentEnv]:
    """A ``MultiAgentEnv`` class whose instances (``cls(config)``) run
    ``config["num_agents"]`` (default 1) copies of the single-agent env: a gymnasium id or a
    creator ``f(config) -> gymnasium.Env``; agent ``i`` plays copy ``i``."""

    class MultiEnv(MultiAgentEnv):
        def __init__(self, config: dict[str, Any] | None = None) -> None:
            super().__init__()
            config = dict(config or {})
            num = int(config.pop("num_agents", 1))
            if isinstance(env_name_or_creator, str):
                self.envs = [gym.make(env_name_or_creator) for _ in range(num)]
            else:
                self.envs = [env_name_or_creator(config) for _ in range(num)]
            self.terminateds: set[int] = set()
            self.truncateds: set[int] = set()
            self.possible_agents = list(range(num))
            self.agents = list(self.possible_agents)
            self.observation_spaces = {i: self.envs[i].observation_space for i in self.agents}
            self.action_spaces = {i: self.envs[i].action_space for i in self.agents}
            self.observation_space = self.envs[0].observation_space
            self.action_space = self.envs[0].action_space

        def reset(self, *, seed: int | None = None,
                  options: dict[str, Any] | None = None) -> tuple[dict[Any, Any],
                                                                  dict[Any, Any]]:
            self.terminateds = set()
            self.truncateds = set()
            self.agents = list(self.possible_agents)
            obs, infos = {}, {}
            for i, env in enumerate(self.envs):
                obs[i], infos[i] = env.reset(seed=None if seed is None else seed + i,
                                             options=options)
            return obs, infos

        def step(self, action_dict: dict[Any, Any]) -> Any:
            if not action_dict:
                raise ValueError("step() needs an action for at least one agent")
            obs, rew, terminated, truncated, info = {}, {}, {}, {}, {}
            for i, action in action_dict.items():
                obs[i], rew[i], terminated[i], truncated[i], info[i] = self.envs[i].step(action)
                if terminated[i]:
                    self.terminateds.add(i)
                if truncated[i]:
                    self.truncateds.add(i)
                if terminated[i] or truncated[i]:
                    self.agents.remove(i)
            terminated[ALL] = len(self.terminateds) + len(self.truncateds) == len(self.envs)
            truncated[ALL] = len(self.truncateds) == len(self.envs)
            return obs, rew, terminated, truncated, info

        def render(self) -> Any:
            return self.envs[0].render()

        def close(self) -> None:
            for env in self.envs:
                env.close()

    name = env_name_or_creator if isinstance(env_name_or_creator, str) else \
        getattr(env_name_or_creator, "__name__", "env")
    MultiEnv.__name__ = MultiEnv.__qualname__ = f"MultiAgent{str(name).split('-')[0]}"
    return MultiEnv

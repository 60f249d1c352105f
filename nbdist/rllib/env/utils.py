"""Turning ``config.environment(env)`` into a creator an env runner can call."""

from __future__ import annotations

from typing import Any


class _GymMaker:
    """``gymnasium.make(env_id, **env_config)`` (picklable, named by the id)."""

    def __init__(self, env_id: str) -> None:
        self.env_id = env_id
        self.__name__ = env_id

    def __call__(self, env_config: dict[str, Any]) -> Any:
        import gymnasium as gym

        return gym.make(self.env_id, **dict(env_config))


class _ClassMaker:
    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.__name__ = cls.__name__

    def __call__(self, env_config: Any) -> Any:
        return self.cls(env_config)


def make_env_creator(env: Any) -> tuple[Any, str]:
    """(creator(env_config) -> Env, name) for a name registered with ``tune.register_env``, a
    gymnasium id, an Env class (built with the env config) or a creator function."""
    from nbdist.tune.registry import get_env_creator

    if isinstance(env, str):
        creator = get_env_creator(env)
        if creator is not None:
            return creator, env
        import gymnasium as gym

        if env not in gym.registry and ":" not in env:
            known = ", ".join(sorted(gym.registry)[:8])
            raise ValueError(f"the env {env!r} is neither registered with tune.register_env "
                             f"nor a gymnasium id (such as {known}, ...)")
        return _GymMaker(env), env
    if isinstance(env, type):
        return _ClassMaker(env), env.__name__
    if callable(env):
        return env, getattr(env, "__name__", type(env).__name__)
    raise TypeError(f"an env is a gymnasium id, a registered name, an Env class or a creator, "
                    f"not {type(env).__name__}")


def probe_spaces(creator: Any, name: str, env_config: dict[str, Any]) -> tuple[Any, Any]:
    """The observation and action spaces of one env built in the driver."""
    from nbdist.rllib.env.env_runner import EnvContext, EnvError

    try:
        env = creator(EnvContext(env_config, 0, 0))
    except Exception as exc:
        raise EnvError(f"the env {name!r} raised while building: {type(exc).__name__}: "
                       f"{exc}") from exc
    try:
        return env.observation_space, env.action_space
    finally:
        try:
            env.close()
        except Exception:
            pass


def probe_env(creator: Any, name: str,
              env_config: dict[str, Any]) -> tuple[Any, Any, dict[Any, Any] | None]:
    """The spaces of one env built in the driver: (observation space, action space, agents),
    agents being None for a single-agent env and ``{agent_id: (observation space, action
    space)}`` for a ``MultiAgentEnv`` (its ``possible_agents``, else its ``agents``)."""
    from nbdist.rllib.env.env_runner import EnvContext, EnvError
    from nbdist.rllib.env.multi_agent_env import MultiAgentEnv

    try:
        env = creator(EnvContext(env_config, 0, 0))
    except Exception as exc:
        raise EnvError(f"the env {name!r} raised while building: {type(exc).__name__}: "
                       f"{exc}") from exc
    try:
        if not isinstance(env, MultiAgentEnv):
            return env.observation_space, env.action_space, None
        agents = list(env.possible_agents or env.agents)
        if not agents:
            env.reset()
            agents = list(env.agents)
        spaces = {aid: (env.get_observation_space(aid), env.get_action_space(aid))
                  for aid in agents}
        first = next(iter(spaces.values()), (None, None))
        return first[0], first[1], spaces
    finally:
        try:
            env.close()
        except Exception:
            pass

"""``ray.tune.registry``: names for environments (``register_env``) and trainables.

``register_env(name, creator)`` lets an RLlib config say ``.environment("name")``; the creator
is called with the env's config (an ``EnvContext``: the ``env_config`` dict plus the runner's
``worker_index`` and ``vector_index``). The registry lives in the driver: an algorithm looks the
name up when it is built and ships the creator itself (pickled) to its env runners, so a creator
registered in a notebook cell reaches every runner, on every backend.
"""

from __future__ import annotations

from typing import Any

from nbdist.tune.tuner import register_trainable

_envs: dict[str, Any] = {}


def register_env(name: str, env_creator: Any) -> None:
    """Name an environment creator (``env_creator(env_config) -> gymnasium.Env``)."""
    if not callable(env_creator):
        raise TypeError(f"register_env takes a callable that builds the env from its config, "
                        f"not {type(env_creator).__name__}")
    _envs[name] = env_creator


def get_env_creator(name: str) -> Any | None:
    """The creator registered as ``name``, or None."""
    return _envs.get(name)


def registered_envs() -> list[str]:
    return sorted(_envs)


def get_trainable_cls(name: str) -> Any:
    """The trainable registered as ``name``, or RLlib's algorithm class of that name ("PPO",
    "DQN", ...): what RLlib's example scripts call with their ``--algo``."""
    from nbdist.tune.tuner import resolve_trainable

    return resolve_trainable(name)[0]


__all__ = ["get_env_creator", "get_trainable_cls", "register_env", "register_trainable",
           "registered_envs"]

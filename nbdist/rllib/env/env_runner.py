"""``SingleAgentEnvRunner``: steps ``num_envs_per_env_runner`` copies of the env with one
batched forward pass of its own copy of the module per step, and hands back episode chunks.

It runs as an actor (one per ``num_env_runners``, see env_runner_group.py) or, with
``num_env_runners=0``, in the driver. Each ``sample`` call may bring new module weights first (a
state put once in the object store by the driver and passed by reference to every runner), then
steps the envs until ``num_timesteps`` env steps (over all its envs) or ``num_episodes``
finished episodes. Episodes in progress are handed out as chunks and continue in the next call
(`SingleAgentEpisode.cut`). With the episodes come the metrics of those that finished (their
returns and lengths) and the step counts.

An env that raises (in its constructor, ``reset`` or ``step``) fails the ``sample`` call with
the env's own traceback, the env's name in front.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from nbdist.rllib.env.single_agent_episode import SingleAgentEpisode


class EnvContext(dict[str, Any]):
    """The ``env_config`` dict a creator gets, with the runner's ``worker_index`` (0 in the
    driver, 1.. in the runners), ``num_workers`` and the env's ``vector_index``."""

    def __init__(self, env_config: dict[str, Any] | None = None, worker_index: int = 0,
                 vector_index: int = 0, num_workers: int = 0, remote: bool = False) -> None:
        super().__init__(env_config or {})
        self.worker_index = worker_index
        self.vector_index = vector_index
        self.num_workers = num_workers
        self.remote = remote

    def copy_with_overrides(self, env_config: dict[str, Any] | None = None,
                            worker_index: int | None = None,
                            vector_index: int | None = None) -> EnvContext:
        return EnvContext(env_config if env_config is not None else dict(self),
                          self.worker_index if worker_index is None else worker_index,
                          self.vector_index if vector_index is None else vector_index,
                          self.num_workers, self.remote)


class EnvError(RuntimeError):
    """An env raised inside an env runner (the env's traceback is the cause)."""


class SingleAgentEnvRunner:
    def __init__(self, *, env_creator: Any, env_name: str = "", env_config: dict | None = None,
                 num_envs: int = 1, module_spec: Any = None, worker_index: int = 0,
                 num_workers: int = 0, seed: int | None = None, clip_actions: bool = True,
                 module_state: dict[str, Any] | None = None) -> None:
        import torch

        torch.set_num_threads(1)
        if seed is not None:  # each runner's own stream of sampled actions
            torch.manual_seed(int(seed) + 1000 * worker_index)
        self.env_name = env_name or getattr(env_creator, "__name__", "env")
        self.worker_index = worker_index
        self.clip_actions = clip_actions
        self.envs = []
        for i in range(max(1, int(num_envs))):
            context = EnvContext(env_config, worker_index, i, num_workers, worker_index > 0)
            self.envs.append(self._call("building", env_creator, context))
        self.observation_space = self.envs[0].observation_space
        self.action_space = self.envs[0].action_space
        self.module = None
        if module_spec is not None:
            spec = module_spec
            spec.observation_space = spec.observation_space or self.observation_space
            spec.action_space = spec.action_space or self.action_space
            self.module = spec.build()
            self.module.eval()
            if module_state is not None:
                self.module.set_state(module_state)
        self.seed = seed
        self.episodes: list[_Episode | None] = [None] * len(self.envs)
        self.env_steps_lifetime = 0
        self.episodes_lifetime = 0

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            import traceback

            frames = traceback.extract_tb(exc.__traceback__)[1:]  # from the env's call on
            env_tb = "".join(traceback.format_list(frames))
            raise EnvError(f"the env {self.env_name!r} raised while {what} in env runner "
                           f"{self.worker_index}: {type(exc).__name__}: {exc}\n"
                           f"The env's traceback (most recent call last):\n{env_tb}"
                           f"{type(exc).__name__}: {exc}") from exc

    # --- the actor's methods --------------------------------------------------------------
    def ping(self) -> str:
        return "pong"

    def apply(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn(self, *args, **kwargs)`` in the runner (``foreach_env_runner``)."""
        return fn(self, *args, **kwargs)

    def get_spaces(self) -> tuple[Any, Any]:
        return self.observation_space, self.action_space

    def set_state(self, state: dict[str, Any]) -> None:
        if self.module is not None and state is not None:
            self.module.set_state(state)

    def get_state(self) -> dict[str, Any]:
        return {"env_steps_lifetime": self.env_steps_lifetime,
                "episodes_lifetime": self.episodes_lifetime}

    def stop(self) -> None:
        for env in self.envs:
            try:
                env.close()
            except Exception:
                pass

    def sample(self, module_state: dict[str, Any] | None = None, *,
               num_timesteps: int | None = None, num_episodes: int | None = None,
               explore: bool = True, random_actions: bool = False,
               force_reset: bool = False) -> dict[str, Any]:
        """Step the envs; returns {"episodes": [...], "episode_returns": [...],
        "episode_lens": [...], "num_env_steps": n, "sample_time_s": s}."""
        start = time.perf_counter()
        if module_state is not None:
            self.set_state(module_state)
        if num_episodes is not None or force_reset:
            self.episodes = [None] * len(self.envs)  # whole episodes: start afresh
        for i, episode in enumerate(self.episodes):
            if episode is None:
                self.episodes[i] = self._reset(i)
        done: list[SingleAgentEpisode] = []
        steps = 0
        returns: list[float] = []
        lens: list[int] = []
        while True:
            if num_episodes is not None and len(returns) >= num_episodes:
                break
            if num_episodes is None and steps >= int(num_timesteps or 1):
                break
            episodes = [e for e in self.episodes if e is not None]
            obs = np.stack([np.asarray(e.observations[-1]) for e in episodes])
            actions, extras = self._act(obs, explore, random_actions)
            for i, episode in enumerate(episodes):
                action = actions[i]
                env_action = self._env_action(action)
                obs_next, reward, terminated, truncated, info = self._call(
                    "stepping", self.envs[i].step, env_action)
                episode.add_env_step(obs_next, action, float(reward), info,
                                     terminated=bool(terminated), truncated=bool(truncated),
                                     extra_model_outputs={k: v[i] for k, v in extras.items()})
                steps += 1
                if episode.is_done:
                    returns.append(episode.get_return_total())
                    lens.append(episode.t)
                    done.append(episode)
                    self.episodes[i] = self._reset(i)
        if num_episodes is None:  # hand out the chunks in progress; they go on next time
            for i, episode in enumerate(self.episodes):
                if episode is not None and len(episode):
                    done.append(episode)
                    self.episodes[i] = episode.cut()
        else:
            done = [e for e in done]
            self.episodes = [None] * len(self.envs)
        self.env_steps_lifetime += steps
        self.episodes_lifetime += len(returns)
        return {"episodes": done, "episode_returns": returns, "episode_lens": lens,
                "num_env_steps": steps, "sample_time_s": time.perf_counter() - start,
                "worker_index": self.worker_index}

    # --- helpers --------------------------------------------------------------------------
    def _reset(self, i: int) -> _Episode:
        seed = None
        if self.seed is not None and self.env_steps_lifetime == 0 and \
                all(e is None for e in self.episodes[i:i + 1]):
            seed = int(self.seed) + 1000 * self.worker_index + i
        obs, info = self._call("resetting", self.envs[i].reset, seed=seed)
        episode = _Episode(observation_space=self.observation_space,
                           action_space=self.action_space)
        episode.add_env_reset(obs, info)
        return episode

    def _act(self, obs: np.ndarray, explore: bool,
             random_actions: bool) -> tuple[Any, dict[str, Any]]:
        if random_actions or self.module is None:
            return [self.action_space.sample() for _ in range(len(obs))], {}
        return self.module.compute_actions(obs, explore=explore, t=self.env_steps_lifetime)

    def _env_action(self, action: Any) -> Any:
        space = self.action_space
        if hasattr(space, "n") and getattr(space, "shape", ()) == ():
            return int(action)
        if self.clip_actions and hasattr(space, "low"):
            return np.clip(action, space.low, space.high)
        return action


class _Episode(SingleAgentEpisode):
    """An episode that remembers the return of the chunks already handed out, so a runner
    reports whole episodes' returns while it hands out chunks."""

    def __init__(self, *args: Any, past_return: float = 0.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.past_return = past_return

    def cut(self) -> _Episode:
        successor = super().cut()
        new = _Episode(successor.id_, observations=successor.observations,
                       infos=successor.infos, t_started=successor.t_started,
                       observation_space=self.observation_space,
                       action_space=self.action_space,
                       past_return=self.past_return + self.get_return())
        return new

    def get_return_total(self) -> float:
        return self.past_return + self.get_return()

    def __reduce__(self) -> Any:  # hand out plain SingleAgentEpisodes
        return (SingleAgentEpisode.from_state, (self.get_state(),))

"""``MultiAgentEnvRunner``: steps ``num_envs_per_env_runner`` copies of a ``MultiAgentEnv``
and hands back ``MultiAgentEpisode`` chunks, as RLlib's new API stack does.

Each step, the agents in each env's last observation dict act: they are grouped by module (the
config's ``policy_mapping_fn(agent_id, episode)``, asked once per agent and episode), each
module computes its agents' actions in one batched forward pass, and every env gets its
``{agent_id: action}`` dict. An agent's trajectory is its own ``SingleAgentEpisode``: the
observation it acted on, its action, and the rewards it got until it next observed (or until
it, or the whole episode, was done). An episode ends when ``terminateds["__all__"]`` or
``truncateds["__all__"]``; its return is the sum over its agents, and the runner reports each
agent's and each module's return beside it. Chunks cut at the end of a ``sample`` call go on in
the next one (the same ``id_``, an agent's pending action with it).

It runs as an actor (the env runner group picks it when the env is a ``MultiAgentEnv`` or the
config names policies) or, with ``num_env_runners=0``, in the driver.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from nbdist.rllib.core import DEFAULT_MODULE_ID
from nbdist.rllib.env.env_runner import EnvContext, SingleAgentEnvRunner
from nbdist.rllib.env.multi_agent_episode import MultiAgentEpisode
from nbdist.rllib.env.single_agent_episode import SingleAgentEpisode

ALL = "__all__"


def default_policy_mapping_fn(agent_id: Any, episode: Any, **_: Any) -> str:
    return DEFAULT_MODULE_ID


class _EnvState:
    """One env's episode in progress: the chunk, the agents to act and the actions waiting
    for their outcome."""

    def __init__(self, episode: MultiAgentEpisode) -> None:
        self.episode = episode
        self.to_act: dict[Any, Any] = {}  # agent -> the observation it acts on next
        self.pending: dict[Any, tuple[Any, dict[str, Any]]] = {}  # agent -> (action, extras)
        self.pending_reward: dict[Any, float] = {}
        self.agent_returns: dict[Any, float] = {}
        self.env_t = 0


class MultiAgentEnvRunner(SingleAgentEnvRunner):
    def __init__(self, *, env_creator: Any, env_name: str = "", env_config: dict | None = None,
                 num_envs: int = 1, module_spec: Any = None, worker_index: int = 0,
                 num_workers: int = 0, seed: int | None = None, clip_actions: bool = True,
                 module_state: dict[str, Any] | None = None,
                 policy_mapping_fn: Any = None) -> None:
        import torch

        torch.set_num_threads(1)
        if seed is not None:
            torch.manual_seed(int(seed) + 1000 * worker_index)
        self.env_name = env_name or getattr(env_creator, "__name__", "env")
        self.worker_index = worker_index
        self.clip_actions = clip_actions
        self.policy_mapping_fn = policy_mapping_fn or default_policy_mapping_fn
        self.envs = []
        for i in range(max(1, int(num_envs))):
            context = EnvContext(env_config, worker_index, i, num_workers, worker_index > 0)
            self.envs.append(self._call("building", env_creator, context))
        self.observation_space = getattr(self.envs[0], "observation_space", None)
        self.action_space = getattr(self.envs[0], "action_space", None)
        self.module = None
        if module_spec is not None:
            self.module = module_spec.build()
            self.module.eval()
            if module_state is not None:
                self.module.set_state(module_state)
        self.seed = seed
        self.states: list[_EnvState | None] = [None] * len(self.envs)
        self.env_steps_lifetime = 0
        self.episodes_lifetime = 0

    def _mapping(self, agent_id: Any, episode: Any) -> str:
        try:
            return str(self.policy_mapping_fn(agent_id, episode, worker=self))
        except TypeError:
            return str(self.policy_mapping_fn(agent_id, episode))

    def sample(self, module_state: dict[str, Any] | None = None, *,
               num_timesteps: int | None = None, num_episodes: int | None = None,
               explore: bool = True, random_actions: bool = False,
               force_reset: bool = False) -> dict[str, Any]:
        """Step the envs; returns {"episodes": [MultiAgentEpisode, ...],
        "episode_returns": [...] (summed over agents), "episode_lens": [...],
        "agent_episode_returns": [{agent: return}, ...], "module_episode_returns":
        [{module: return}, ...], "num_env_steps": n, "num_agent_steps": {agent: n},
        "num_module_steps": {module: n}, "sample_time_s": s}."""
        start = time.perf_counter()
        if module_state is not None:
            self.set_state(module_state)
        if num_episodes is not None or force_reset:
            self.states = [None] * len(self.envs)
        for i, state in enumerate(self.states):
            if state is None:
                self.states[i] = self._reset(i)
        out: list[MultiAgentEpisode] = []
        steps = 0
        returns: list[float] = []
        lens: list[int] = []
        agent_returns: list[dict[Any, float]] = []
        module_returns: list[dict[str, float]] = []
        agent_steps: dict[Any, int] = {}
        module_steps: dict[str, int] = {}
        while True:
            if num_episodes is not None and len(returns) >= num_episodes:
                break
            if num_episodes is None and steps >= int(num_timesteps or 1):
                break
            actions = self._act_all(explore, random_actions)
            for i, state in enumerate(self.states):
                assert state is not None
                action_dict = actions[i]
                env_actions = {aid: self._env_action_for(i, aid, a)
                               for aid, (a, _) in action_dict.items()}
                for aid in action_dict:
                    mid = state.episode.module_for(aid)
                    agent_steps[aid] = agent_steps.get(aid, 0) + 1
                    module_steps[mid] = module_steps.get(mid, 0) + 1
                state.pending.update(action_dict)
                state.to_act = {}
                obs, rew, term, trunc, infos = self._call("stepping", self.envs[i].step,
                                                          env_actions)
                steps += 1
                self._record_step(i, state, obs, rew, term, trunc, infos)
                if state.episode.is_done:
                    episode = state.episode
                    returns.append(float(sum(state.agent_returns.values())))
                    lens.append(state.env_t)
                    agent_returns.append(dict(state.agent_returns))
                    per_module: dict[str, float] = {}
                    for aid, r in state.agent_returns.items():
                        mid = episode.module_for(aid)
                        per_module[mid] = per_module.get(mid, 0.0) + r
                    module_returns.append(per_module)
                    out.append(self._handout(episode))
                    self.states[i] = self._reset(i)
        if num_episodes is None:  # hand out the chunks in progress; they go on next time
            for state in self.states:
                if state is not None and len(state.episode):
                    out.append(self._handout(state.episode))
                    state.episode = self._successor(state.episode)
        else:
            self.states = [None] * len(self.envs)
        out = [e for e in out if e.agent_episodes]
        self.env_steps_lifetime += steps
        self.episodes_lifetime += len(returns)
        return {"episodes": out, "episode_returns": returns, "episode_lens": lens,
                "agent_episode_returns": agent_returns, "module_episode_returns": module_returns,
                "num_env_steps": steps, "num_agent_steps": agent_steps,
                "num_module_steps": module_steps,
                "sample_time_s": time.perf_counter() - start, "worker_index": self.worker_index}

    # --- helpers --------------------------------------------------------------------------
    def _reset(self, i: int) -> _EnvState:  # type: ignore[override]
        seed = None
        if self.seed is not None and self.env_steps_lifetime == 0 and self.states[i] is None:
            seed = int(self.seed) + 1000 * self.worker_index + i
        obs, infos = self._call("resetting", self.envs[i].reset, seed=seed)
        episode = MultiAgentEpisode(agent_to_module_mapping_fn=self._mapping)
        state = _EnvState(episode)
        for aid, o in obs.items():
            agent = SingleAgentEpisode(observation_space=self._obs_space(i, aid),
                                       action_space=self._act_space(i, aid))
            agent.add_env_reset(o, (infos or {}).get(aid, {}))
            episode.agent_episodes[aid] = agent
            state.to_act[aid] = o
        return state

    def _obs_space(self, i: int, aid: Any) -> Any:
        env = self.envs[i]
        get = getattr(env, "get_observation_space", None)
        return get(aid) if get else env.observation_space

    def _act_space(self, i: int, aid: Any) -> Any:
        env = self.envs[i]
        get = getattr(env, "get_action_space", None)
        return get(aid) if get else env.action_space

    def _act_all(self, explore: bool, random_actions: bool) -> list[dict[Any, Any]]:
        """{agent: (action, extras)} per env: each module's agents in one forward pass."""
        groups: dict[str, list[tuple[int, Any, Any]]] = {}
        for i, state in enumerate(self.states):
            assert state is not None
            for aid, o in state.to_act.items():
                groups.setdefault(state.episode.module_for(aid), []).append((i, aid, o))
        actions: list[dict[Any, Any]] = [{} for _ in self.states]
        for mid, rows in groups.items():
            if random_actions or self.module is None:
                for i, aid, _o in rows:
                    actions[i][aid] = (self._act_space(i, aid).sample(), {})
                continue
            if mid not in self.module:
                raise ValueError(f"policy_mapping_fn mapped agent {rows[0][1]!r} to module "
                                 f"{mid!r}, which is not among the policies "
                                 f"{sorted(self.module.keys())}")
            obs = np.stack([np.asarray(o) for _i, _aid, o in rows])
            acts, extras = self.module[mid].compute_actions(obs, explore=explore,
                                                            t=self.env_steps_lifetime)
            for k, (i, aid, _o) in enumerate(rows):
                actions[i][aid] = (acts[k], {key: v[k] for key, v in extras.items()})
        return actions

    def _env_action_for(self, i: int, aid: Any, action: Any) -> Any:
        space = self._act_space(i, aid)
        if hasattr(space, "n") and getattr(space, "shape", ()) == ():
            return int(action)
        if self.clip_actions and hasattr(space, "low"):
            return np.clip(action, space.low, space.high)
        return action

    def _record_step(self, i: int, state: _EnvState, obs: dict[Any, Any], rew: dict[Any, float],
                     term: dict[Any, bool], trunc: dict[Any, bool],
                     infos: dict[Any, Any]) -> None:
        episode = state.episode
        state.env_t += 1
        episode.env_t += 1
        term, trunc, infos = term or {}, trunc or {}, infos or {}
        for aid, r in (rew or {}).items():
            state.pending_reward[aid] = state.pending_reward.get(aid, 0.0) + float(r)
            state.agent_returns[aid] = state.agent_returns.get(aid, 0.0) + float(r)
        all_term = bool(term.get(ALL, False))
        all_done = all_term or bool(trunc.get(ALL, False))
        for aid in list(dict.fromkeys([*obs, *state.pending])):
            agent_term = bool(term.get(aid, False)) or all_term
            agent_trunc = not agent_term and (bool(trunc.get(aid, False)) or all_done)
            agent = episode.agent_episodes.get(aid)
            if aid in state.pending:
                if aid not in obs and not (agent_term or agent_trunc):
                    continue  # its turn has not come back yet
                assert agent is not None
                action, extras = state.pending.pop(aid)
                next_obs = obs[aid] if aid in obs else agent.observations[-1]
                agent.add_env_step(next_obs, action, state.pending_reward.pop(aid, 0.0),
                                   infos.get(aid, {}), terminated=agent_term,
                                   truncated=agent_trunc, extra_model_outputs=extras)
            elif agent is None or not agent.observations:  # a new agent's first observation
                agent = SingleAgentEpisode(observation_space=self._obs_space(i, aid),
                                           action_space=self._act_space(i, aid))
                agent.add_env_reset(obs[aid], infos.get(aid, {}))
                episode.agent_episodes[aid] = agent
                state.pending_reward.pop(aid, None)
            if aid in obs and not (agent_term or agent_trunc or all_done or agent.is_done):
                state.to_act[aid] = obs[aid]  # (an agent once done does not come back)
        if all_done:
            for agent in episode.agent_episodes.values():
                if not agent.is_done:
                    agent.is_terminated = all_term
                    agent.is_truncated = not all_term
            episode.is_terminated = all_term
            episode.is_truncated = not all_term
            state.to_act = {}

    def _handout(self, episode: MultiAgentEpisode) -> MultiAgentEpisode:
        """A copy to hand out: the agents that acted in this chunk."""
        for aid in episode.agent_episodes:
            episode.module_for(aid)
        chunk = MultiAgentEpisode(episode.id_, agent_to_module=episode.agent_to_module_map,
                                  agent_episodes={aid: e for aid, e in
                                                  episode.agent_episodes.items() if len(e)},
                                  env_t_started=episode.env_t_started, env_t=episode.env_t)
        chunk.is_terminated, chunk.is_truncated = episode.is_terminated, episode.is_truncated
        return chunk

    def _successor(self, episode: MultiAgentEpisode) -> MultiAgentEpisode:
        agents = {aid: (e.cut() if len(e) else e) for aid, e in episode.agent_episodes.items()
                  if not e.is_done}
        return MultiAgentEpisode(episode.id_, agent_episodes=agents,
                                 agent_to_module_mapping_fn=self._mapping,
                                 agent_to_module=episode.agent_to_module_map,
                                 env_t_started=episode.env_t, env_t=episode.env_t)


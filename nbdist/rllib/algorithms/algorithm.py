"""``Algorithm``: an RL algorithm as RLlib's new API stack shapes it, on nbdist's public API.

What ``config.build_algo()`` builds, and what ``train()`` does each iteration::

    driver                                              actors (one placement group)
    Algorithm.setup:  env creator resolved, spaces read from one env, module built (torch),
                      EnvRunnerGroup started ──────────────────────> env_runner 1 .. N
                      learner built while they start, then waits for them
    Algorithm.train:  training_step()  ── sample_episodes() ───────> runner.sample(weights ref)
                        (the subclass)  <── episodes + returns ──────
                                        ── learner update (driver, or
                                           learner actors: core/learner/learner_group.py) ──
                                        ── sync_weights() ─ nbdist.put(state) once ─> runners
                      result dict (Ray 2.60's keys), RunUpdate on the event stream

The extension contract (how an algorithm is written; PPO in algorithms/ppo/ppo.py is the
reference, ~150 lines):

1. Its config: ``class FooConfig(AlgorithmConfig)`` with ``__init__(self, algo_class=None)``
   calling ``super().__init__(algo_class=algo_class or Foo)`` and then setting its defaults
   (RLlib's values: ``self.lr = ...``, ``self.foo_coeff = ...``); a ``training(self, *,
   foo_coeff=NotProvided, ..., **kwargs)`` that sets its own fields (``self._set(foo_coeff=
   foo_coeff)``) and passes the rest to ``super().training(**kwargs)``; optionally
   ``get_default_rl_module_spec()`` returning ``RLModuleSpec(module_class=...)`` (default: the
   actor-critic MLP of core/rl_module) and ``validate()``. ``to_dict``/``update_from_dict``
   pick the new fields up by themselves (every attribute is a field).

2. Its algorithm: ``class Foo(Algorithm)`` with
   - ``get_default_config(cls) -> FooConfig()`` (a classmethod);
   - ``build_learner(self) -> Learner | None`` (optional): made in ``setup`` after
     ``self.module`` exists; the default returns None. A ``Learner`` subclass implements
     ``compute_loss_for_module`` and gets ``update(batch, minibatch_size=, num_epochs=)``
     (core/learner/learner.py);
   - ``training_step(self) -> dict``: one iteration. Inside it:
       ``episodes = self.sample_episodes(num_env_steps=n)``  (or ``num_episodes=``,
           ``explore=``, ``random_actions=``): a list of ``SingleAgentEpisode`` chunks from all
           runners (from the driver's own runner when ``num_env_runners=0``); the finished
           episodes' returns and lengths and the step counts go into the ``env_runners``
           results by themselves;
       the update (``self.learner.update(batch, ...)`` or your own torch code on
           ``self.module``);
       ``self.sync_weights()``: the module's new state to every runner (one put);
     and return the learner results keyed by module id: ``{"default_policy": {"total_loss":
     ..., ...}}`` (numbers). ``train()`` adds ``__all_modules__`` with
     ``num_env_steps_trained`` when the dict has a ``"num_env_steps_trained"`` entry at the top
     (pop it there), and returns ``{"env_runners": {...}, "learners": {...},
     "training_iteration": i, "num_env_steps_sampled_lifetime": ..., "time_this_iter_s": ...,
     "evaluation": {...} (when due), ...}``. Extra top-level keys: put them in
     ``self.extra_results`` (a dict, cleared each iteration).
   - state beyond the module, the learner's optimizer and the counters (a replay buffer, an
     exploration schedule): override ``get_state``/``set_state`` and call super; checkpoints
     (``save_to_path``/``restore_from_path``/``from_checkpoint``) and Tune's pausing use them.
   - an algorithm that samples with its own tasks (ES: rollouts as tasks) sets
     ``num_env_runners=0`` in its defaults, uses ``self.env_creator``/``self.env_config`` to
     make envs in its tasks, and calls ``self.record_episodes(returns, lens, env_steps)`` so
     the ``env_runners`` results and the learning curve still fill.
   - register the name for ``tune.Tuner("Foo", ...)`` in algorithms/registry.py.

Multi-agent (a ``MultiAgentEnv``; ``supports_multi_agent = True`` in the algorithm, PPO's
is the reference): ``self.is_multi_agent`` is True, ``self.module`` is a ``MultiRLModule``
(``self.get_module(module_id)``), ``sample_episodes`` returns ``MultiAgentEpisode`` chunks
(``get_agent_episodes_by_module()``), ``self.is_trainable(module_id)`` reads
``policies_to_train``; return one learner-results entry per module updated. The per-agent
and per-module returns fill the ``env_runners`` results by themselves.

Useful attributes: ``self.config`` (the frozen config), ``self.module`` (torch, in the
driver), ``self.learner``, ``self.env_runner_group``, ``self.observation_space``,
``self.action_space``, ``self.iteration``, ``self.counters`` (``num_env_steps_sampled_lifetime``,
``num_env_steps_trained_lifetime``, ``num_episodes_lifetime``), ``self.run_name``.

The algorithm is also a Tune ``Trainable`` (``step`` = ``train``, ``save_checkpoint`` =
``save_to_path``), so ``tune.Tuner(PPO, param_space=config)`` runs it as a trial. In the driver
each iteration, from the first ``train()`` on, publishes ``RunUpdate`` records (library
``"rllib"``, run = ``self.run_name``): member ``"learner"`` with the return and the step counts
(the live view draws the learning curve like a Train run's) and one member ``"env_runner N"``
per runner with its env steps; runner calls are marked as the library's (``library_call``). Interrupting ``train()`` (KeyboardInterrupt) stops the algorithm: its
runners are killed and the placement group removed before the interrupt goes on.
"""

from __future__ import annotations

import collections
import itertools
import math
import os
import time
from typing import Any

import numpy as np

import nbdist
from nbdist.rllib.algorithms.algorithm_config import AlgorithmConfig
from nbdist.rllib.core import ALL_MODULES, DEFAULT_MODULE_ID
from nbdist.rllib.env.multi_agent_episode import MultiAgentEpisode
from nbdist.tune.trainable.trainable import Trainable

STATE_FILE = "algorithm_state.pkl"
_names = itertools.count(1)


class Algorithm(Trainable):
    """Base of every algorithm (see the module docstring for the contract)."""

    _allow_unknown_configs = True
    config: Any  # the frozen AlgorithmConfig (a dict in Trainable)

    def __init__(self, config: AlgorithmConfig | dict[str, Any] | None = None, env: Any = None,
                 logger_creator: Any = None, **kwargs: Any) -> None:
        if isinstance(config, AlgorithmConfig):
            algo_config = config.copy(copy_frozen=False)
        else:
            algo_config = self.get_default_config()
            if config:
                algo_config.update_from_dict(dict(config))
        if env is not None:
            algo_config.env = env
        algo_config.algo_class = type(self)
        self._iteration = 0
        self._info: dict[str, Any] = {}
        self._bind(kwargs.get("trial_info") or {})
        self.setup(algo_config)

    @classmethod
    def get_default_config(cls) -> AlgorithmConfig:
        return AlgorithmConfig(algo_class=cls)

    # --- building -------------------------------------------------------------------------
    def setup(self, config: Any) -> None:
        import torch

        from nbdist.rllib.env.env_runner_group import EnvRunnerGroup
        from nbdist.rllib.env.utils import make_env_creator, probe_env

        config.validate()
        if not nbdist.is_initialized():
            nbdist.init()
        config.freeze()
        self.config = config
        if config.seed is not None:
            torch.manual_seed(int(config.seed))
            np.random.seed(int(config.seed))
        self.env_creator, self.env_name = make_env_creator(config.env)
        self.env_config = dict(config.env_config or {})
        others = set(config.policies or {}) - {DEFAULT_MODULE_ID}
        agents: dict[Any, Any] | None = None
        if config.observation_space is not None and config.action_space is not None \
                and not others:
            self.observation_space, self.action_space = (config.observation_space,
                                                         config.action_space)
        else:
            self.observation_space, self.action_space, agents = probe_env(
                self.env_creator, self.env_name, self.env_config)
        self.is_multi_agent = agents is not None
        if others and agents is None:
            raise ValueError(f"policies {sorted(others)} need a MultiAgentEnv, and "
                             f"{self.env_name!r} is a single-agent env")
        if self.is_multi_agent and not self.supports_multi_agent:
            raise NotImplementedError(
                f"{type(self).__name__} does not train multi-agent envs in nbdist.rllib yet "
                "(PPO does)")
        if agents is not None:
            self.module_spec = self._multi_rl_module_spec(config, agents)
        else:
            self.module_spec = config.get_rl_module_spec(self.observation_space,
                                                         self.action_space)
        self.module = self.module_spec.build()
        self.module.eval()
        self.run_name = f"{type(self).__name__}_{self.env_name}_{next(_names)}"
        self.counters: dict[str, int] = collections.defaultdict(int)
        window = int(config.metrics_num_episodes_for_smoothing)
        self._returns: collections.deque[float] = collections.deque(maxlen=window)
        self._lens: collections.deque[int] = collections.deque(maxlen=window)
        self._iter_returns: list[float] = []
        self._iter: dict[str, float] = collections.defaultdict(float)
        self._agent_returns: dict[Any, collections.deque[float]] = {}
        self._module_returns: dict[str, collections.deque[float]] = {}
        self._iter_agent_steps: dict[Any, int] = collections.defaultdict(int)
        self._iter_module_steps: dict[str, int] = collections.defaultdict(int)
        self._agent_steps_lifetime: dict[Any, int] = collections.defaultdict(int)
        self._module_steps_lifetime: dict[str, int] = collections.defaultdict(int)
        self.extra_results: dict[str, Any] = {}
        self._time_total = 0.0
        self._stopped = False
        self.evaluation_env_runner_group: Any = None
        self.env_runner_group = EnvRunnerGroup(
            config=config, env_creator=self.env_creator, env_name=self.env_name,
            module_spec=self.module_spec, run_name=self.run_name,
            module_state=self.module.get_state(), on_restart=self._runner_restarted,
            wait_ready=False)
        self.learner: Any = None
        try:  # the learner is built while the runners' processes start
            self.learner = self.build_learner()
            self.env_runner_group.wait_ready()
        except BaseException:
            self.env_runner_group.stop()
            if hasattr(self.learner, "stop"):
                self.learner.stop()
            raise
        self._runner_steps: dict[int, int] = collections.defaultdict(int)
        self._published = False  # the first record goes out with the first train()

    def build_learner(self) -> Any:
        """The algorithm's ``Learner`` (None: ``training_step`` updates ``self.module``)."""
        return None

    supports_multi_agent = False  # the algorithm trains a MultiRLModule (PPO)

    def _multi_rl_module_spec(self, config: Any, agents: dict[Any, Any]) -> Any:
        """One module spec per policy, with the spaces of the first agent mapped to it (of
        the first agent if none is)."""
        from nbdist.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
        from nbdist.rllib.env.multi_agent_env_runner import default_policy_mapping_fn

        policies = dict(config.policies or {DEFAULT_MODULE_ID: None})
        if config.policy_mapping_fn is None:
            only = next(iter(policies)) if len(policies) == 1 else DEFAULT_MODULE_ID
            config.policy_mapping_fn = (default_policy_mapping_fn if only == DEFAULT_MODULE_ID
                                        else _MapTo(only))
        probe = MultiAgentEpisode(agent_to_module_mapping_fn=_Mapping(config.policy_mapping_fn))
        spaces: dict[str, Any] = {}
        for aid, agent_spaces in agents.items():
            spaces.setdefault(probe.module_for(aid), agent_spaces)
        unknown = sorted(set(spaces) - set(policies))
        if unknown:
            raise ValueError(f"policy_mapping_fn maps agents to {unknown}, which are not "
                             f"among the policies {sorted(policies)}")
        first = next(iter(agents.values()))
        given = config._rl_module_spec
        given_specs = dict(getattr(given, "rl_module_specs", None) or {})
        specs = {}
        for mid, policy in policies.items():
            obs_space, act_space = spaces.get(mid, first)
            obs_space = getattr(policy, "observation_space", None) or obs_space
            act_space = getattr(policy, "action_space", None) or act_space
            base = given_specs.get(mid)
            if base is None and hasattr(policy, "module_class"):
                base = policy
            specs[str(mid)] = config.get_rl_module_spec(obs_space, act_space, base=base)
        return MultiRLModuleSpec(rl_module_specs=specs)

    def is_trainable(self, module_id: str) -> bool:
        """Whether ``policies_to_train`` lets the learner update ``module_id``."""
        ptt = self.config.policies_to_train
        if ptt is None:
            return True
        if callable(ptt):
            return bool(ptt(module_id, None))
        return module_id in set(ptt)

    @property
    def env_runner(self) -> Any:
        return self.env_runner_group.local_env_runner

    # --- what training_step uses ----------------------------------------------------------
    def sample_episodes(self, *, num_env_steps: int | None = None,
                        num_episodes: int | None = None, explore: bool = True,
                        random_actions: bool = False) -> list[Any]:
        results = self.env_runner_group.sample(num_timesteps=num_env_steps,
                                               num_episodes=num_episodes, explore=explore,
                                               random_actions=random_actions)
        episodes: list[Any] = []  # SingleAgentEpisode (MultiAgentEpisode) chunks
        for result in results:
            episodes += result["episodes"]
            self._runner_steps[int(result.get("worker_index", 0))] += result["num_env_steps"]
            self.record_episodes(result["episode_returns"], result["episode_lens"],
                                 result["num_env_steps"])
            if "agent_episode_returns" in result:
                self._record_agents(result)
            self._iter["sample_time_s"] = max(self._iter["sample_time_s"],
                                              result["sample_time_s"])
        return episodes

    def record_episodes(self, returns: list[float], lens: list[int], env_steps: int) -> None:
        """Count finished episodes' returns and lengths and the env steps sampled."""
        self._returns.extend(float(r) for r in returns)
        self._lens.extend(int(n) for n in lens)
        self._iter_returns += [float(r) for r in returns]
        self._iter["num_env_steps_sampled"] += env_steps
        self._iter["num_episodes"] += len(returns)
        self.counters["num_env_steps_sampled_lifetime"] += int(env_steps)
        self.counters["num_episodes_lifetime"] += len(returns)

    def _record_agents(self, result: dict[str, Any]) -> None:
        """A multi-agent runner's per-agent and per-module returns and step counts."""
        window = int(self.config.metrics_num_episodes_for_smoothing)
        for returns, store in ((result["agent_episode_returns"], self._agent_returns),
                               (result["module_episode_returns"], self._module_returns)):
            for episode in returns:
                for key, value in episode.items():
                    store.setdefault(key, collections.deque(maxlen=window)).append(float(value))
        for key, n in result["num_agent_steps"].items():
            self._iter_agent_steps[key] += n
            self._agent_steps_lifetime[key] += n
        for key, n in result["num_module_steps"].items():
            self._iter_module_steps[key] += n
            self._module_steps_lifetime[key] += n

    def sync_weights(self) -> None:
        self.env_runner_group.sync_weights(self.module.get_state())

    def training_step(self) -> dict[str, Any]:
        raise NotImplementedError(f"{type(self).__name__} must implement training_step()")

    # --- an iteration ---------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        if self._stopped:
            raise RuntimeError(f"{self.run_name} was stopped; build a new algorithm")
        # The whole call, its records included: an interrupt anywhere in it stops the algorithm.
        try:
            start = time.perf_counter()
            if not self._published:  # the live view shows in the cell that trains
                self._publish("RUNNING", "training")
            self._iter = collections.defaultdict(float)
            self._iter_returns = []
            self._iter_agent_steps = collections.defaultdict(int)
            self._iter_module_steps = collections.defaultdict(int)
            self.extra_results = {}
            learner_results = dict(self.training_step() or {})
            min_time = self.config.min_time_s_per_iteration
            while min_time and time.perf_counter() - start < float(min_time):
                learner_results = dict(self.training_step() or {})
            self._iteration += 1
            result = self._result(learner_results, time.perf_counter() - start)
            interval = self.config.evaluation_interval
            if interval and self._iteration % int(interval) == 0:
                result["evaluation"] = self.evaluate()
            self._publish("RUNNING", "", result)
        except KeyboardInterrupt:
            self.stop()
            raise
        return result

    def step(self) -> dict[str, Any]:  # Tune's name for one iteration
        return self.train()

    def _result(self, learner_results: dict[str, Any], took: float) -> dict[str, Any]:
        self._time_total += took
        trained = learner_results.pop("num_env_steps_trained", None)
        if trained is not None:
            self.counters["num_env_steps_trained_lifetime"] += int(trained)
            learner_results.setdefault(ALL_MODULES, {}).update(
                {"num_env_steps_trained": int(trained),
                 "num_env_steps_trained_lifetime":
                     self.counters["num_env_steps_trained_lifetime"]})
        sampled = int(self._iter["num_env_steps_sampled"])
        returns = list(self._returns)
        env_runners = {
            "episode_return_mean": float(np.mean(returns)) if returns else math.nan,
            "episode_return_max": float(np.max(returns)) if returns else math.nan,
            "episode_return_min": float(np.min(returns)) if returns else math.nan,
            "episode_len_mean": float(np.mean(self._lens)) if self._lens else math.nan,
            "episode_len_max": float(np.max(self._lens)) if self._lens else math.nan,
            "num_episodes": int(self._iter["num_episodes"]),
            "num_env_steps_sampled": sampled,
            "num_env_steps_sampled_lifetime": self.counters["num_env_steps_sampled_lifetime"],
            "num_episodes_lifetime": self.counters["num_episodes_lifetime"],
            "num_agent_steps_sampled": {"default_agent": sampled},
            "num_module_steps_sampled": {DEFAULT_MODULE_ID: sampled},
            "sample": self._iter["sample_time_s"],
            "num_healthy_workers": self.env_runner_group.num_healthy_remote_workers(),
        }
        if self.is_multi_agent:
            env_runners.update({
                "agent_episode_returns_mean": {a: float(np.mean(r))
                                               for a, r in self._agent_returns.items()},
                "module_episode_returns_mean": {m: float(np.mean(r))
                                                for m, r in self._module_returns.items()},
                "num_agent_steps_sampled": dict(self._iter_agent_steps),
                "num_module_steps_sampled": dict(self._iter_module_steps),
                "num_agent_steps_sampled_lifetime": dict(self._agent_steps_lifetime),
                "num_module_steps_sampled_lifetime": dict(self._module_steps_lifetime)})
        result: dict[str, Any] = {
            "env_runners": env_runners,
            "learners": learner_results,
            "training_iteration": self._iteration,
            "num_env_steps_sampled_lifetime": self.counters["num_env_steps_sampled_lifetime"],
            "num_env_steps_trained_lifetime": self.counters["num_env_steps_trained_lifetime"],
            "num_episodes_lifetime": self.counters["num_episodes_lifetime"],
            "fault_tolerance": {
                "num_healthy_workers": self.env_runner_group.num_healthy_remote_workers(),
                "num_remote_worker_restarts": self.env_runner_group.num_restarts},
            "time_this_iter_s": took,
            "time_total_s": self._time_total,
            "timers": {"training_iteration": took,
                       "env_runner_sampling_timer": self._iter["sample_time_s"]},
            "done": False,
        }
        result.update(self.extra_results)
        return result

    # --- evaluation, inference ------------------------------------------------------------
    def evaluate(self) -> dict[str, Any]:
        """Run ``evaluation_duration`` episodes (or timesteps) with the current weights,
        greedy unless ``evaluation_config`` says ``explore: True``; returns
        ``{"env_runners": {"episode_return_mean": ..., ...}}``."""
        from nbdist.rllib.env.env_runner_group import EnvRunnerGroup

        config = self.config
        overrides = dict(config.evaluation_config or {})
        if self.evaluation_env_runner_group is None:
            eval_config = config.copy(copy_frozen=False)
            eval_config.update_from_dict({k: v for k, v in overrides.items()
                                          if k != "explore"})
            self.evaluation_env_runner_group = EnvRunnerGroup(
                config=eval_config, env_creator=self.env_creator, env_name=self.env_name,
                module_spec=self.module_spec, run_name=self.run_name + "_eval",
                num_env_runners=int(config.evaluation_num_env_runners),
                module_state=self.module.get_state())
        group = self.evaluation_env_runner_group
        group.sync_weights(self.module.get_state())
        explore = bool(overrides.get("explore", False))
        duration = config.evaluation_duration
        if duration == "auto":
            duration = 10
        by_steps = config.evaluation_duration_unit == "timesteps"
        results = group.sample(num_timesteps=int(duration) if by_steps else None,
                               num_episodes=None if by_steps else int(duration),
                               explore=explore)
        returns = [r for res in results for r in res["episode_returns"]]
        lens = [n for res in results for n in res["episode_lens"]]
        steps = sum(res["num_env_steps"] for res in results)
        out: dict[str, Any] = {
            "episode_return_mean": float(np.mean(returns)) if returns else math.nan,
            "episode_return_max": float(np.max(returns)) if returns else math.nan,
            "episode_return_min": float(np.min(returns)) if returns else math.nan,
            "episode_len_mean": float(np.mean(lens)) if lens else math.nan,
            "num_episodes": len(returns), "num_env_steps_sampled": int(steps)}
        for key in ("agent_episode_returns", "module_episode_returns"):
            if self.is_multi_agent:
                per: dict[Any, list[float]] = {}
                for res in results:
                    for episode in res[key]:
                        for name, value in episode.items():
                            per.setdefault(name, []).append(float(value))
                out[key + "_mean"] = {name: float(np.mean(v)) for name, v in per.items()}
        return {"env_runners": out}

    def get_module(self, module_id: str = DEFAULT_MODULE_ID) -> Any:
        """The module ``module_id`` (in the driver); None if the algorithm has no such
        module. A single-agent algorithm's one module is ``default_policy``."""
        if self.is_multi_agent:
            return self.module[module_id] if module_id in self.module else None
        return self.module

    def compute_single_action(self, observation: Any, *, explore: bool = False,
                              policy_id: str = DEFAULT_MODULE_ID, **_: Any) -> Any:
        """The action of module ``policy_id`` for one observation (greedy unless
        ``explore``)."""
        module = self.get_module(policy_id)
        if module is None:
            raise KeyError(f"no module {policy_id!r}")
        actions, _extras = module.compute_actions(np.asarray(observation)[None],
                                                  explore=explore)
        action = actions[0]
        space = module.action_space
        if hasattr(space, "n") and getattr(space, "shape", ()) == ():
            return int(action)
        if hasattr(space, "low"):  # as the env runners send it to the env
            return np.clip(action, space.low, space.high)
        return action

    def compute_actions(self, observations: Any, *, explore: bool = False,
                        policy_id: str = DEFAULT_MODULE_ID, **_: Any) -> Any:
        return self.get_module(policy_id).compute_actions(np.asarray(observations),
                                                          explore=explore)[0]

    # --- state, checkpoints ---------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        return {"rl_module": self.module.get_state(),
                "learner": None if self.learner is None else self.learner.get_state(),
                "counters": dict(self.counters), "iteration": self._iteration,
                "time_total_s": self._time_total, "returns": list(self._returns),
                "lens": list(self._lens),
                "agent_returns": {a: list(r) for a, r in self._agent_returns.items()},
                "module_returns": {m: list(r) for m, r in self._module_returns.items()}}

    def set_state(self, state: dict[str, Any]) -> None:
        self.module.set_state(state["rl_module"])
        if self.learner is not None and state.get("learner") is not None:
            self.learner.set_state(state["learner"])
        self.counters.clear()
        self.counters.update(state.get("counters", {}))
        self._iteration = int(state.get("iteration", 0))
        self._time_total = float(state.get("time_total_s", 0.0))
        self._returns.clear()
        self._returns.extend(state.get("returns", []))
        self._lens.clear()
        self._lens.extend(state.get("lens", []))
        window = int(self.config.metrics_num_episodes_for_smoothing)
        self._agent_returns = {a: collections.deque(r, maxlen=window)
                               for a, r in state.get("agent_returns", {}).items()}
        self._module_returns = {m: collections.deque(r, maxlen=window)
                                for m, r in state.get("module_returns", {}).items()}
        self.sync_weights()

    def save_to_path(self, path: str | None = None, **_: Any) -> str:
        """Write the algorithm (its class, config and state) into ``path`` (a new temporary
        directory if None); returns the path."""
        import tempfile

        import cloudpickle

        path = path or tempfile.mkdtemp(prefix=f"{type(self).__name__}_checkpoint_")
        os.makedirs(path, exist_ok=True)
        config = self.config.copy(copy_frozen=False)
        with open(os.path.join(path, STATE_FILE), "wb") as f:
            cloudpickle.dump({"class": type(self), "config": config,
                              "state": self.get_state()}, f)
        return path

    save = save_to_path

    def restore_from_path(self, path: str, **_: Any) -> None:
        with open(os.path.join(_checkpoint_path(path), STATE_FILE), "rb") as f:
            saved = _load(f)
        self.set_state(saved["state"])

    restore = restore_from_path

    @classmethod
    def from_checkpoint(cls, path: Any, **_: Any) -> Algorithm:
        """The algorithm saved at ``path`` (a directory or a ``Checkpoint``), rebuilt."""
        with open(os.path.join(_checkpoint_path(path), STATE_FILE), "rb") as f:
            saved = _load(f)
        algo_class = saved["class"] if cls is Algorithm else cls
        algo = algo_class(config=saved["config"])
        algo.set_state(saved["state"])
        return algo

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any] | None:
        self.save_to_path(checkpoint_dir)
        return None

    def load_checkpoint(self, checkpoint: dict[str, Any] | str) -> None:
        self.restore_from_path(str(checkpoint))

    # --- the end --------------------------------------------------------------------------
    def stop(self) -> None:
        """Kill the env runners and remove their placement group (idempotent)."""
        if getattr(self, "_stopped", True):
            return
        self._stopped = True
        for group in (self.env_runner_group, self.evaluation_env_runner_group):
            if group is not None:
                group.stop()
        if hasattr(self.learner, "stop"):  # learner actors
            self.learner.stop()
        if self._published:
            self._publish("TERMINATED", "stopped")

    def cleanup(self) -> None:
        self.stop()

    def __del__(self) -> None:
        try:
            if not getattr(self, "_stopped", True) and nbdist.is_initialized():
                self.stop()
        except Exception:
            pass

    def __enter__(self) -> Algorithm:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # --- the event stream -----------------------------------------------------------------
    def _runner_restarted(self, index: int, error: BaseException) -> None:
        self._publish("RUNNING", f"env_runner {index} died ({type(error).__name__}); "
                                 f"replaced")

    def _publish(self, status: str, note: str, result: dict[str, Any] | None = None) -> None:
        metrics: tuple[tuple[str, float], ...] = ()
        if result is not None:
            runners = result["env_runners"]
            values = {"episode_return_mean": runners["episode_return_mean"],
                      "episode_len_mean": runners["episode_len_mean"],
                      "num_env_steps_sampled_lifetime":
                          runners["num_env_steps_sampled_lifetime"],
                      "time_this_iter_s": result["time_this_iter_s"]}
            metrics = tuple((k, float(v)) for k, v in values.items()
                            if isinstance(v, (int, float)) and not math.isnan(v))
        self._published = True
        updates: list[tuple[str, tuple[tuple[str, float], ...], str]] = [
            ("learner", metrics, note)]
        for index, steps in sorted(self._runner_steps.items()):
            where = "the driver" if index == 0 else "an actor"
            updates.append((f"env_runner {index}", (("num_env_steps_sampled", float(steps)),),
                            f"samples in {where}" if result is None else ""))
        try:
            for member, numbers, text in updates:
                nbdist.events.publish(nbdist.events.RunUpdate(
                    time.time(), "rllib", run=self.run_name, member=member, status=status,
                    iteration=self._iteration, metrics=numbers, note=text))
        except Exception:  # no event stream on this backend
            pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}(env={self.env_name}; env-runners={len(self.env_runner_group.actors)})"


class _MapTo:
    """The mapping of every agent to one module (picklable)."""

    def __init__(self, module_id: str) -> None:
        self.module_id = module_id

    def __call__(self, agent_id: Any, episode: Any, **_: Any) -> str:
        return self.module_id


class _Mapping:
    """``policy_mapping_fn(agent_id, episode, **kwargs)``, or ``(agent_id, episode)`` for a
    fn that takes no keywords, as the runners call it."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __call__(self, agent_id: Any, episode: Any) -> str:
        try:
            return str(self.fn(agent_id, episode, worker=None))
        except TypeError:
            return str(self.fn(agent_id, episode))


def _checkpoint_path(path: Any) -> str:
    return str(getattr(path, "path", path))


def _load(f: Any) -> dict[str, Any]:
    import pickle

    return pickle.load(f)

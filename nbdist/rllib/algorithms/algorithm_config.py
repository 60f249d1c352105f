"""``AlgorithmConfig``: RLlib's builder of an algorithm's settings (Ray 2.60's new API stack).

Every builder method sets the fields it names and returns the config, so calls chain::

    config = (PPOConfig()
              .environment("CartPole-v1")
              .env_runners(num_env_runners=2)
              .training(lr=3e-4, train_batch_size=4000))
    algo = config.build_algo()

The fields keep RLlib's names (``num_env_runners``, ``train_batch_size``, ``model_config``,
``evaluation_interval``, ...). ``to_dict()`` gives them as a flat dict, the form Tune searches
over (``tune.Tuner("PPO", param_space=config.to_dict())``; a config is also a read-only mapping,
so ``param_space=config`` works too) and ``update_from_dict`` reads it back. An algorithm's own
config subclasses this one, sets its defaults in ``__init__`` and adds its keywords to
``training()`` (see nbdist/rllib/algorithms/algorithm.py for the whole contract).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any


class _NotProvided:
    """The default of every builder keyword: "leave this field as it is"."""

    def __repr__(self) -> str:
        return "NotProvided"


NotProvided: Any = _NotProvided()

# Fields a builder takes under another name, or that other keys are aliases of.
_ALIASES = {"num_workers": "num_env_runners", "num_rollout_workers": "num_env_runners",
            "num_envs_per_worker": "num_envs_per_env_runner", "sgd_minibatch_size":
            "minibatch_size", "num_sgd_iter": "num_epochs", "lambda": "lambda_",
            "framework": "framework_str"}


class AlgorithmConfig:
    def __init__(self, algo_class: type | None = None) -> None:
        self.algo_class = algo_class
        # environment()
        self.env: Any = None
        self.env_config: dict[str, Any] = {}
        self.observation_space: Any = None
        self.action_space: Any = None
        self.clip_rewards: Any = None
        self.normalize_actions = True
        self.clip_actions = False
        self.disable_env_checking = False
        # env_runners()
        self.num_env_runners = 0
        self.num_envs_per_env_runner = 1
        self.num_cpus_per_env_runner: float = 1
        self.num_gpus_per_env_runner: float = 0
        self.rollout_fragment_length: int | str = "auto"
        self.batch_mode = "truncate_episodes"
        self.explore = True
        self.sample_timeout_s: float | None = 60.0
        self.env_to_module_connector: Any = None
        self.module_to_env_connector: Any = None
        self.episode_lookback_horizon = 1
        # fault_tolerance()
        self.restart_failed_env_runners = True
        self.max_num_env_runner_restarts = 1000
        self.ignore_env_runner_failures = False
        # training()
        self.gamma = 0.99
        self.lr: Any = 0.001
        self.grad_clip: float | None = None
        self.grad_clip_by = "global_norm"
        self.train_batch_size = 4000
        self.train_batch_size_per_learner: int | None = None
        self.minibatch_size: int | None = None
        self.num_epochs = 1
        self.shuffle_batch_per_epoch = True
        self.optimizer: dict[str, Any] = {}
        self.learner_class: Any = None
        self.learner_connector: Any = None
        # learners()
        self.num_learners = 0
        self.num_cpus_per_learner: Any = "auto"
        self.num_gpus_per_learner: float = 0
        # rl_module()
        self.model_config: dict[str, Any] = {}
        self._rl_module_spec: Any = None
        # framework(), api_stack(), resources()
        self.framework_str = "torch"
        self.enable_rl_module_and_learner = True
        self.enable_env_runner_and_connector_v2 = True
        self.num_gpus = 0
        # multi_agent()
        self.policies: dict[str, Any] = {}
        self.policy_mapping_fn: Callable[..., str] | None = None
        self.policies_to_train: Any = None
        # evaluation()
        self.evaluation_interval: int | None = None
        self.evaluation_duration: int | str = 10
        self.evaluation_duration_unit = "episodes"
        self.evaluation_num_env_runners = 0
        self.evaluation_config: dict[str, Any] | None = None
        self.evaluation_parallel_to_training = False
        # reporting(), debugging(), callbacks(), checkpointing()
        self.metrics_num_episodes_for_smoothing = 100
        self.min_time_s_per_iteration: float | None = None
        self.min_env_steps_per_iteration: int | None = None
        self.keep_per_episode_custom_metrics = False
        self.seed: int | None = None
        self.log_level = "WARN"
        self.callbacks_class: Any = None
        self.checkpoint_trainable_policies_only = False
        self._frozen = False

    # --- builders -------------------------------------------------------------------------
    def _set(self, **fields: Any) -> AlgorithmConfig:
        if self._frozen:
            raise AttributeError("this AlgorithmConfig is frozen (it belongs to a built "
                                 "algorithm); copy() it to change it")
        for name, value in fields.items():
            if value is not NotProvided:
                setattr(self, name, value)
        return self

    def environment(self, env: Any = NotProvided, *, env_config: Any = NotProvided,
                    observation_space: Any = NotProvided, action_space: Any = NotProvided,
                    clip_rewards: Any = NotProvided, normalize_actions: Any = NotProvided,
                    clip_actions: Any = NotProvided, disable_env_checking: Any = NotProvided,
                    **_: Any) -> AlgorithmConfig:
        """The env: a gymnasium id, a ``gymnasium.Env`` class, a name registered with
        ``tune.register_env``, or a creator ``f(env_config) -> Env``."""
        return self._set(env=env, env_config=env_config, observation_space=observation_space,
                         action_space=action_space, clip_rewards=clip_rewards,
                         normalize_actions=normalize_actions, clip_actions=clip_actions,
                         disable_env_checking=disable_env_checking)

    def env_runners(self, *, num_env_runners: Any = NotProvided,
                    num_envs_per_env_runner: Any = NotProvided,
                    num_cpus_per_env_runner: Any = NotProvided,
                    num_gpus_per_env_runner: Any = NotProvided,
                    rollout_fragment_length: Any = NotProvided, batch_mode: Any = NotProvided,
                    explore: Any = NotProvided, sample_timeout_s: Any = NotProvided,
                    env_to_module_connector: Any = NotProvided,
                    module_to_env_connector: Any = NotProvided,
                    episode_lookback_horizon: Any = NotProvided,
                    **_: Any) -> AlgorithmConfig:
        """How many env-runner actors sample (0: the driver samples itself), with how many
        envs each (stepped together, one batched forward pass per step)."""
        return self._set(num_env_runners=num_env_runners,
                         num_envs_per_env_runner=num_envs_per_env_runner,
                         num_cpus_per_env_runner=num_cpus_per_env_runner,
                         num_gpus_per_env_runner=num_gpus_per_env_runner,
                         rollout_fragment_length=rollout_fragment_length, batch_mode=batch_mode,
                         explore=explore, sample_timeout_s=sample_timeout_s,
                         env_to_module_connector=env_to_module_connector,
                         module_to_env_connector=module_to_env_connector,
                         episode_lookback_horizon=episode_lookback_horizon)

    rollouts = env_runners  # the old name

    def fault_tolerance(self, *, restart_failed_env_runners: Any = NotProvided,
                        max_num_env_runner_restarts: Any = NotProvided,
                        ignore_env_runner_failures: Any = NotProvided,
                        **_: Any) -> AlgorithmConfig:
        return self._set(restart_failed_env_runners=restart_failed_env_runners,
                         max_num_env_runner_restarts=max_num_env_runner_restarts,
                         ignore_env_runner_failures=ignore_env_runner_failures)

    def training(self, *, gamma: Any = NotProvided, lr: Any = NotProvided,
                 grad_clip: Any = NotProvided, grad_clip_by: Any = NotProvided,
                 train_batch_size: Any = NotProvided,
                 train_batch_size_per_learner: Any = NotProvided,
                 minibatch_size: Any = NotProvided, num_epochs: Any = NotProvided,
                 shuffle_batch_per_epoch: Any = NotProvided, optimizer: Any = NotProvided,
                 learner_class: Any = NotProvided, learner_connector: Any = NotProvided,
                 **kwargs: Any) -> AlgorithmConfig:
        unknown = sorted(k for k in kwargs if k not in ("model",))
        if unknown:
            raise TypeError(f"{type(self).__name__}.training() got unknown keyword(s) "
                            f"{unknown}")
        return self._set(gamma=gamma, lr=lr, grad_clip=grad_clip, grad_clip_by=grad_clip_by,
                         train_batch_size=train_batch_size,
                         train_batch_size_per_learner=train_batch_size_per_learner,
                         minibatch_size=minibatch_size, num_epochs=num_epochs,
                         shuffle_batch_per_epoch=shuffle_batch_per_epoch, optimizer=optimizer,
                         learner_class=learner_class, learner_connector=learner_connector)

    def learners(self, *, num_learners: Any = NotProvided,
                 num_cpus_per_learner: Any = NotProvided,
                 num_gpus_per_learner: Any = NotProvided, **_: Any) -> AlgorithmConfig:
        """Where the update runs: ``num_learners=0`` in the driver; N > 0: PPO's update runs
        data-parallel in N learner actors (``num_cpus_per_learner`` each, "auto" = 1), the
        gradients averaged; the other algorithms still update in the driver."""
        return self._set(num_learners=num_learners, num_cpus_per_learner=num_cpus_per_learner,
                         num_gpus_per_learner=num_gpus_per_learner)

    def evaluation(self, *, evaluation_interval: Any = NotProvided,
                   evaluation_duration: Any = NotProvided,
                   evaluation_duration_unit: Any = NotProvided,
                   evaluation_num_env_runners: Any = NotProvided,
                   evaluation_config: Any = NotProvided,
                   evaluation_parallel_to_training: Any = NotProvided,
                   **_: Any) -> AlgorithmConfig:
        """Evaluate every ``evaluation_interval`` iterations (None: only on ``evaluate()``),
        for ``evaluation_duration`` episodes (or timesteps), without exploration unless
        ``evaluation_config={"explore": True}``."""
        return self._set(evaluation_interval=evaluation_interval,
                         evaluation_duration=evaluation_duration,
                         evaluation_duration_unit=evaluation_duration_unit,
                         evaluation_num_env_runners=evaluation_num_env_runners,
                         evaluation_config=evaluation_config,
                         evaluation_parallel_to_training=evaluation_parallel_to_training)

    def framework(self, framework: Any = NotProvided, **_: Any) -> AlgorithmConfig:
        if framework is not NotProvided and framework != "torch":
            raise ValueError(f"nbdist.rllib runs on torch only, not {framework!r}")
        return self._set(framework_str=framework)

    def api_stack(self, enable_rl_module_and_learner: Any = NotProvided,
                  enable_env_runner_and_connector_v2: Any = NotProvided) -> AlgorithmConfig:
        if False in (enable_rl_module_and_learner, enable_env_runner_and_connector_v2):
            raise ValueError("nbdist.rllib has RLlib's new API stack only")
        return self

    def resources(self, *, num_gpus: Any = NotProvided, **_: Any) -> AlgorithmConfig:
        return self._set(num_gpus=num_gpus)

    def rl_module(self, *, model_config: Any = NotProvided, rl_module_spec: Any = NotProvided,
                  **_: Any) -> AlgorithmConfig:
        """The module's ``model_config`` (``fcnet_hiddens``, ``fcnet_activation``,
        ``vf_share_layers``, ``head_fcnet_hiddens``), or a whole ``RLModuleSpec``."""
        if model_config is not NotProvided and not isinstance(model_config, dict):
            model_config = dict(vars(model_config))  # a DefaultModelConfig dataclass
        return self._set(model_config=model_config, _rl_module_spec=rl_module_spec)

    def multi_agent(self, *, policies: Any = NotProvided, policy_mapping_fn: Any = NotProvided,
                    policies_to_train: Any = NotProvided, **_: Any) -> AlgorithmConfig:
        """Several modules (policies) for the agents of a ``MultiAgentEnv``: ``policies`` (a
        set of module ids, or a dict of id -> None / ``RLModuleSpec`` / a spec with
        ``observation_space`` and ``action_space``), ``policy_mapping_fn(agent_id, episode,
        **kwargs) -> module_id`` (asked once per agent and episode), ``policies_to_train``
        (a collection of ids, or ``f(module_id, batch) -> bool``; None: all)."""
        if isinstance(policies, (set, frozenset)):  # built in a fixed order: seeds repeat
            policies = {p: None for p in sorted(policies, key=str)}
        elif policies is not NotProvided and not isinstance(policies, dict):
            policies = {p: None for p in policies}
        return self._set(policies=policies, policy_mapping_fn=policy_mapping_fn,
                         policies_to_train=policies_to_train)

    @property
    def is_multi_agent(self) -> bool:
        return bool(self.policies)

    def reporting(self, *, metrics_num_episodes_for_smoothing: Any = NotProvided,
                  min_time_s_per_iteration: Any = NotProvided,
                  min_env_steps_per_iteration: Any = NotProvided,
                  keep_per_episode_custom_metrics: Any = NotProvided,
                  **_: Any) -> AlgorithmConfig:
        return self._set(metrics_num_episodes_for_smoothing=metrics_num_episodes_for_smoothing,
                         min_time_s_per_iteration=min_time_s_per_iteration,
                         min_env_steps_per_iteration=min_env_steps_per_iteration,
                         keep_per_episode_custom_metrics=keep_per_episode_custom_metrics)

    def debugging(self, *, seed: Any = NotProvided, log_level: Any = NotProvided,
                  **_: Any) -> AlgorithmConfig:
        return self._set(seed=seed, log_level=log_level)

    def callbacks(self, callbacks_class: Any = NotProvided, **_: Any) -> AlgorithmConfig:
        return self._set(callbacks_class=callbacks_class)

    def checkpointing(self, **_: Any) -> AlgorithmConfig:
        return self

    # --- derived values -------------------------------------------------------------------
    @property
    def total_train_batch_size(self) -> int:
        per_learner = self.train_batch_size_per_learner
        if per_learner is not None:
            return int(per_learner) * max(1, int(self.num_learners))
        return int(self.train_batch_size)

    def get_rollout_fragment_length(self, worker_index: int = 0) -> int:
        if self.rollout_fragment_length != "auto":
            return int(self.rollout_fragment_length)
        runners = max(1, int(self.num_env_runners))
        envs = max(1, int(self.num_envs_per_env_runner))
        return max(1, -(-self.total_train_batch_size // (runners * envs)))

    @property
    def model_config_dict(self) -> dict[str, Any]:
        return dict(self.model_config)

    def get_default_rl_module_spec(self) -> Any:
        """The algorithm's default module (an ``RLModuleSpec``); subclasses override it."""
        from nbdist.rllib.core.rl_module import ActorCriticMLPModule, RLModuleSpec

        return RLModuleSpec(module_class=ActorCriticMLPModule)

    def get_rl_module_spec(self, observation_space: Any, action_space: Any,
                           base: Any = None) -> Any:
        """The module spec for these spaces: ``base`` (one policy's own spec), else the one
        given to ``rl_module(rl_module_spec=...)``, else the algorithm's default, with the
        spaces and ``model_config`` filled in."""
        given = self._rl_module_spec
        if base is None and given is not None and not hasattr(given, "rl_module_specs"):
            base = given
        spec = copy.copy(base or self.get_default_rl_module_spec())
        if spec.module_class is None:
            spec.module_class = self.get_default_rl_module_spec().module_class
        spec.observation_space = spec.observation_space or observation_space
        spec.action_space = spec.action_space or action_space
        spec.model_config = {**self.model_config, **(spec.model_config or {})}
        return spec

    # --- building and copying -------------------------------------------------------------
    def validate(self) -> None:
        if self.env is None:
            raise ValueError("no env: call .environment(env=...) with a gymnasium id, an Env "
                             "class or a name registered with tune.register_env")
        if int(self.num_env_runners) < 0:
            raise ValueError("num_env_runners must be >= 0")
        if self.framework_str != "torch":
            raise ValueError("nbdist.rllib runs on torch only")
        ptt = self.policies_to_train
        if ptt is not None and not callable(ptt) and self.policies:
            unknown = sorted(set(ptt) - set(self.policies))
            if unknown:
                raise ValueError(f"policies_to_train names {unknown}, which are not among "
                                 f"the policies {sorted(self.policies)}")

    def build_algo(self, env: Any = None, logger_creator: Any = None,
                   use_copy: bool = True) -> Any:
        """The algorithm this config describes, built (env runners started, module made)."""
        config = self.copy(copy_frozen=False) if use_copy else self
        if env is not None:
            config.env = env
        if config.algo_class is None:
            raise ValueError("this AlgorithmConfig has no algo_class: use an algorithm's "
                             "config (PPOConfig(), ...) or pass algo_class=")
        return config.algo_class(config=config)

    build = build_algo

    def copy(self, copy_frozen: bool | None = None) -> AlgorithmConfig:
        new = copy.copy(self)
        for name, value in vars(self).items():
            if isinstance(value, (dict, list)):
                setattr(new, name, copy.deepcopy(value))
        new._frozen = self._frozen if copy_frozen is None else bool(copy_frozen and
                                                                     self._frozen)
        return new

    def freeze(self) -> None:
        self._frozen = True

    def to_dict(self) -> dict[str, Any]:
        """The fields as a flat dict (RLlib's keys; ``"lambda"`` for ``lambda_``)."""
        out = {}
        for name, value in vars(self).items():
            if name == "_frozen":
                continue
            key = {"lambda_": "lambda", "_rl_module_spec": "rl_module_spec"}.get(name, name)
            out[key] = value
        out["framework"] = self.framework_str
        return out

    def update_from_dict(self, config: dict[str, Any]) -> AlgorithmConfig:
        for key, value in config.items():
            if key in ("framework", "algo_class") and value is None:
                continue
            name = _ALIASES.get(key, key)
            name = {"rl_module_spec": "_rl_module_spec"}.get(name, name)
            if isinstance(value, dict) and isinstance(getattr(self, name, None), dict) and \
                    name not in ("env_config", "model_config", "policies"):
                value = {**getattr(self, name), **value}
            if name == "framework_str":
                self.framework(value)
            setattr(self, name, value)
        return self

    @classmethod
    def from_dict(cls, config: dict[str, Any]) -> AlgorithmConfig:
        return cls().update_from_dict(config)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, _ALIASES.get(key, key), default)

    # A read-only mapping of to_dict(): dict(config), Tune's param_space=config.
    def keys(self) -> list[str]:
        return list(self.to_dict())

    def __getitem__(self, key: str) -> Any:
        d = self.to_dict()
        if key in d:
            return d[key]
        return getattr(self, _ALIASES.get(key, key))

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self.to_dict()

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __repr__(self) -> str:
        algo = getattr(self.algo_class, "__name__", None)
        return f"{type(self).__name__}(algo_class={algo}, env={self.env!r})"

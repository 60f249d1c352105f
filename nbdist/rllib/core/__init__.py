"""RLlib's core: ``RLModule`` (the torch network an algorithm trains and its env runners act
with) and ``Learner`` (the update of a module from a batch of episodes)."""

DEFAULT_MODULE_ID = "default_policy"
ALL_MODULES = "__all_modules__"
COMPONENT_RL_MODULE = "rl_module"
COMPONENT_LEARNER = "learner"
COMPONENT_ENV_RUNNER = "env_runner"

__all__ = ["ALL_MODULES", "COMPONENT_ENV_RUNNER", "COMPONENT_LEARNER", "COMPONENT_RL_MODULE",
           "DEFAULT_MODULE_ID"]

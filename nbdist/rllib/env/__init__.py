"""Env runners, episodes, env creators and multi-agent envs (``ray.rllib.env``)."""

from nbdist.rllib.env.env_runner import EnvContext, EnvError, SingleAgentEnvRunner
from nbdist.rllib.env.multi_agent_env import MultiAgentEnv, make_multi_agent
from nbdist.rllib.env.single_agent_episode import SingleAgentEpisode

EnvRunner = SingleAgentEnvRunner

__all__ = ["EnvContext", "EnvError", "EnvRunner", "MultiAgentEnv", "SingleAgentEnvRunner",
           "SingleAgentEpisode", "make_multi_agent"]

"""Env runners, episodes and env creators (``ray.rllib.env``)."""

from nbdist.rllib.env.env_runner import EnvContext, EnvError, SingleAgentEnvRunner
from nbdist.rllib.env.single_agent_episode import SingleAgentEpisode

EnvRunner = SingleAgentEnvRunner

__all__ = ["EnvContext", "EnvError", "EnvRunner", "SingleAgentEnvRunner", "SingleAgentEpisode"]

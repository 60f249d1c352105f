"""Replay buffers for the off-policy algorithms (Ray's ``ray.rllib.utils.replay_buffers``)."""

from nbdist.rllib.utils.replay_buffers.replay_buffer import (
    PrioritizedReplayBuffer,
    ReplayBuffer,
    make_replay_buffer,
)

EpisodeReplayBuffer = ReplayBuffer
PrioritizedEpisodeReplayBuffer = PrioritizedReplayBuffer

__all__ = ["EpisodeReplayBuffer", "PrioritizedEpisodeReplayBuffer", "PrioritizedReplayBuffer",
           "ReplayBuffer", "make_replay_buffer"]

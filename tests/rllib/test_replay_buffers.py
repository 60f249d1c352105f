"""Replay buffers and n-step transitions against hand-computed rows (numpy, no cluster)."""

from __future__ import annotations

import numpy as np
import pytest

from nbdist.rllib.utils.replay_buffers import (
    PrioritizedEpisodeReplayBuffer,
    PrioritizedReplayBuffer,
    ReplayBuffer,
    make_replay_buffer,
)
from nbdist.rllib.utils.replay_buffers.n_step import n_step_transitions


def test_the_ring_overwrites_the_oldest_rows_and_keeps_the_last_of_a_long_batch() -> None:
    buffer = ReplayBuffer(capacity=3, seed=0)
    buffer.add({"a": np.array([0, 1]), "obs": np.zeros((2, 4), np.float32)})
    buffer.add({"a": np.array([2, 3]), "obs": np.ones((2, 4), np.float32)})
    assert len(buffer) == 3 and buffer.num_added == 4
    assert sorted(buffer.get_state()["columns"]["a"]) == [1, 2, 3]
    sample = buffer.sample(50)
    assert set(sample["a"]) == {1, 2, 3} and sample["obs"].shape == (50, 4)
    assert sample["obs"].dtype == np.float32

    fresh = ReplayBuffer(capacity=3)
    fresh.add({"a": np.arange(5)})
    assert sorted(fresh.get_state()["columns"]["a"]) == [2, 3, 4]
    fresh.add({"a": np.array([5])})  # replaces the oldest left, 2
    assert sorted(fresh.get_state()["columns"]["a"]) == [3, 4, 5]


def test_a_buffer_refuses_an_empty_sample_and_foreign_keys() -> None:
    buffer = ReplayBuffer(capacity=4)
    with pytest.raises(ValueError, match="empty replay buffer"):
        buffer.sample(1)
    buffer.add({"a": np.zeros(2)})
    with pytest.raises(ValueError, match="buffer's keys"):
        buffer.add({"b": np.zeros(2)})


def test_prioritized_sampling_weights_and_new_rows_at_the_largest_priority() -> None:
    buffer = PrioritizedReplayBuffer(capacity=4, alpha=1.0, beta=1.0, epsilon=0.0, seed=1)
    rows = buffer.add({"a": np.array([10, 11])})
    buffer.update_priorities(rows, np.array([1.0, -3.0]))
    # P = [1/4, 3/4]; four stratified draws over a mass of 4 land once on row 0, thrice on 1.
    sample = buffer.sample(4)
    assert list(sample["batch_indexes"]) == [0, 1, 1, 1]
    assert list(sample["a"]) == [10, 11, 11, 11]
    # (N P)^-beta / max = [2, 2/3] / 2
    np.testing.assert_allclose(sample["weights"], [1.0, 1 / 3, 1 / 3, 1 / 3], rtol=1e-6)
    buffer.add({"a": np.array([12])})
    np.testing.assert_allclose(buffer.get_state()["priorities"][:3], [1.0, 3.0, 3.0])


def test_state_round_trip_gives_the_same_samples() -> None:
    buffer = PrioritizedReplayBuffer(capacity=8, seed=3)
    buffer.add({"a": np.arange(6)})
    buffer.update_priorities(np.arange(6), np.arange(6) + 0.5)
    copy = PrioritizedReplayBuffer(capacity=1)
    copy.set_state(buffer.get_state())
    first, second = buffer.sample(5), copy.sample(5)
    for key in first:
        np.testing.assert_array_equal(first[key], second[key])


def test_replay_buffer_config_names_the_buffer() -> None:
    buffer = make_replay_buffer({"type": "PrioritizedEpisodeReplayBuffer", "capacity": 7,
                                 "alpha": 0.5})
    assert isinstance(buffer, PrioritizedEpisodeReplayBuffer)
    assert (buffer.capacity, buffer.alpha, buffer.beta) == (7, 0.5, 0.4)
    assert type(make_replay_buffer({"type": ReplayBuffer})) is ReplayBuffer
    with pytest.raises(ValueError, match="Unknown replay buffer type"):
        make_replay_buffer({"type": "NoSuchBuffer"})


def test_n_step_transitions_stop_at_episode_ends_and_at_the_fragment_end() -> None:
    steps = {"obs": np.array([0, 1, 2, 3]), "actions": np.array([0, 1, 0, 1]),
             "rewards": np.array([1.0, 2.0, 3.0, 4.0]),
             "new_obs": np.array([1, 2, 3, 4]),
             "terminateds": np.array([False, True, False, False]),
             "truncateds": np.zeros(4, bool)}
    out = n_step_transitions(steps, n=2, gamma=0.5)
    np.testing.assert_allclose(out["rewards"], [1 + 0.5 * 2, 2, 3 + 0.5 * 4, 4])
    np.testing.assert_allclose(out["discounts"], [0.25, 0.5, 0.25, 0.5])
    assert list(out["new_obs"]) == [2, 2, 4, 4]
    assert list(out["terminateds"]) == [True, True, False, False]
    one = n_step_transitions(steps, n=1, gamma=0.5)
    np.testing.assert_allclose(one["rewards"], steps["rewards"])
    assert list(one["new_obs"]) == [1, 2, 3, 4]

"""Which checkpoints a training run keeps (CheckpointConfig's rules), decided over plain data."""

from __future__ import annotations

import pytest

from nbdist.train import Checkpoint, CheckpointConfig
from nbdist.train.checkpoint_manager import CheckpointManager


def _register(manager: CheckpointManager, losses: list[float]) -> list[list[str]]:
    return [[c.path for c in manager.register(i, Checkpoint(f"c{i}"), {"loss": loss})]
            for i, loss in enumerate(losses)]


def test_without_num_to_keep_every_checkpoint_is_kept() -> None:
    manager = CheckpointManager()
    assert _register(manager, [3.0, 2.0, 1.0]) == [[], [], []]
    assert [c.path for c, _ in manager.best_checkpoints] == ["c0", "c1", "c2"]
    assert manager.latest == Checkpoint("c2")


def test_num_to_keep_without_a_score_keeps_the_most_recent() -> None:
    manager = CheckpointManager(CheckpointConfig(num_to_keep=2))
    assert _register(manager, [3.0, 2.0, 1.0, 0.5]) == [[], [], ["c0"], ["c1"]]
    assert [c.path for c, _ in manager.best_checkpoints] == ["c2", "c3"]


@pytest.mark.parametrize(("order", "kept"), [("min", ["c1", "c3", "c4"]),
                                             ("max", ["c0", "c2", "c4"])])
def test_the_best_by_score_are_kept_and_the_latest_too(order: str, kept: list[str]) -> None:
    manager = CheckpointManager(CheckpointConfig(
        num_to_keep=2, checkpoint_score_attribute="loss", checkpoint_score_order=order))
    _register(manager, [5.0, 1.0, 4.0, 2.0, 3.0])
    assert [c.path for c, _ in manager.best_checkpoints] == kept
    assert manager.latest == Checkpoint("c4")


def test_a_report_without_the_score_ranks_last() -> None:
    manager = CheckpointManager(CheckpointConfig(num_to_keep=1, checkpoint_score_attribute="acc"))
    manager.register(0, Checkpoint("c0"), {"acc": 0.5})
    assert manager.register(1, Checkpoint("c1"), {}) == []  # the latest: kept
    assert manager.register(2, Checkpoint("c2"), {"acc": 0.1}) == [Checkpoint("c1")]
    assert [c.path for c, _ in manager.best_checkpoints] == ["c0", "c2"]


def test_invalid_configs_are_refused() -> None:
    with pytest.raises(ValueError, match="num_to_keep=0"):
        CheckpointConfig(num_to_keep=0)
    with pytest.raises(ValueError, match="checkpoint_score_order"):
        CheckpointConfig(checkpoint_score_order="best")

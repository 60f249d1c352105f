"""The configuration objects of a search, with Ray Tune's names and defaults."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_STORAGE = os.path.join("~", "nbdist_results")


@dataclass
class CheckpointConfig:
    """Which checkpoints to keep: the last ``num_to_keep`` (all when None), or the best by
    ``checkpoint_score_attribute``; class trainables save every ``checkpoint_frequency``
    iterations and at the end with ``checkpoint_at_end``."""
    num_to_keep: int | None = None
    checkpoint_score_attribute: str | None = None
    checkpoint_score_order: str = "max"
    checkpoint_frequency: int = 0
    checkpoint_at_end: bool | None = None

    def __post_init__(self) -> None:
        if self.num_to_keep is not None and self.num_to_keep <= 0:
            raise ValueError(f"num_to_keep must be a positive integer or None, got "
                             f"{self.num_to_keep}")
        if self.checkpoint_score_order not in ("max", "min"):
            raise ValueError("checkpoint_score_order must be 'max' or 'min'")


@dataclass
class FailureConfig:
    """``max_failures``: how many times a failed trial is restarted from its last checkpoint
    (-1: without limit); ``fail_fast``: end the search at the first trial error (``"raise"``:
    and raise it)."""
    max_failures: int = 0
    fail_fast: bool | str = False


@dataclass
class RunConfig:
    name: str | None = None
    storage_path: str | None = None
    stop: Mapping[str, Any] | Callable[..., bool] | Any = None
    verbose: int | None = None
    callbacks: list[Any] | None = None
    checkpoint_config: CheckpointConfig = field(default_factory=CheckpointConfig)
    failure_config: FailureConfig = field(default_factory=FailureConfig)
    log_to_file: bool | str = False
    progress_reporter: Any = None  # a tune.CLIReporter (or any ProgressReporter)

    def __post_init__(self) -> None:
        if self.checkpoint_config is None:
            self.checkpoint_config = CheckpointConfig()
        if self.failure_config is None:
            self.failure_config = FailureConfig()


@dataclass
class TuneConfig:
    metric: str | None = None
    mode: str | None = None
    search_alg: Any = None
    scheduler: Any = None
    num_samples: int = 1
    max_concurrent_trials: int | None = None
    time_budget_s: float | None = None
    reuse_actors: bool | None = None
    trial_name_creator: Callable[[Any], str] | None = None
    trial_dirname_creator: Callable[[Any], str] | None = None

    def __post_init__(self) -> None:
        if self.mode not in (None, "min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {self.mode!r}")

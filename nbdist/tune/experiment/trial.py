"""``Trial``: the driver's record of one configuration being trained.

Owned by the controller's thread (the one running ``Tuner.fit``); schedulers and searchers read
it and, for PBT, set ``config`` and ``restore_from``. Nothing here does I/O or talks to actors:
``status`` moves PENDING → RUNNING → (PAUSED → RUNNING)* → TERMINATED | ERROR, and every
report the trial made is kept in ``results`` (the learning curve, ``Result.metrics_dataframe``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nbdist.tune.checkpoint import Checkpoint


@dataclass(eq=False)
class Trial:
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    TERMINATED = "TERMINATED"
    ERROR = "ERROR"

    trial_id: str
    config: dict[str, Any]
    trainable_name: str = "trainable"
    experiment_tag: str = ""
    evaluated_params: dict[str, Any] = field(default_factory=dict)
    resources: dict[str, float] = field(default_factory=lambda: {"CPU": 1.0})
    bundles: list[dict[str, float]] | None = None  # a placement group's bundles, when several
    placement_strategy: str = "PACK"
    status: str = PENDING
    last_result: dict[str, Any] = field(default_factory=dict)
    results: list[dict[str, Any]] = field(default_factory=list)
    checkpoint: Checkpoint | None = None
    # Every checkpoint still on disk with the result it came with (its iteration, score).
    checkpoints: list[tuple[Checkpoint, dict[str, Any]]] = field(default_factory=list)
    restore_from: Checkpoint | None = None
    error: str | None = None
    error_file: str | None = None
    error_cause: BaseException | None = None
    num_failures: int = 0
    local_path: str = ""
    relative_logdir: str = ""
    stopping: str = ""  # the decision sent to its actor and not yet carried out
    custom_trial_name: str | None = None  # what TuneConfig(trial_name_creator=) made of it

    @property
    def placement_group_factory(self) -> Any:
        from nbdist.tune.trainable.resources import PlacementGroupFactory

        return PlacementGroupFactory(self.bundles or [dict(self.resources)],
                                     self.placement_strategy)

    @property
    def path(self) -> str:
        return self.local_path

    @property
    def is_finished(self) -> bool:
        return self.status in (Trial.TERMINATED, Trial.ERROR)

    @property
    def iteration(self) -> int:
        return int(self.last_result.get("training_iteration", 0) or 0)

    def __str__(self) -> str:
        if self.custom_trial_name:
            return self.custom_trial_name
        return f"{self.trainable_name}_{self.trial_id}"

    def __repr__(self) -> str:
        return f"Trial({self.trial_id}, {self.status})"

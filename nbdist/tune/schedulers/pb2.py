"""``PB2`` (Population Based Bandits), importable as in Ray Tune but not implemented.

Programs written for Ray import it from ``tune.schedulers.pb2``; constructing it says what is
missing and what to use instead, rather than failing on the import with a bare
``ModuleNotFoundError``.
"""

from __future__ import annotations

from typing import Any

from nbdist.tune.schedulers.trial_scheduler import TrialScheduler

__all__ = ["PB2"]


class PB2(TrialScheduler):
    """Ray Tune's PB2: PBT whose explore step picks new hyperparameters with a Gaussian-process
    bandit over ``hyperparam_bounds``. nbdist.tune does not implement it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            "PB2 (Population Based Bandits) is not implemented by nbdist.tune. Use "
            "nbdist.tune.schedulers.PopulationBasedTraining (random or custom explore over "
            "hyperparam_mutations), or run Ray Tune's own PB2 with `from ray import tune` "
            "(the `ray` extra installs it beside nbdist).")

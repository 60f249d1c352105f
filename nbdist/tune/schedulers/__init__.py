"""Trial schedulers (Ray Tune's ``tune.schedulers``): decisions per reported result.

Each scheduler is a pure decision function over the trials' recorded results (no processes,
no clocks); the runner carries the decisions out. See ``trial_scheduler`` for the interface.
"""

from __future__ import annotations

import inspect
from typing import Any

from nbdist.tune.schedulers.async_hyperband import ASHAScheduler, AsyncHyperBandScheduler
from nbdist.tune.schedulers.hyperband import HyperBandScheduler
from nbdist.tune.schedulers.median_stopping_rule import MedianStoppingRule
from nbdist.tune.schedulers.pb2 import PB2
from nbdist.tune.schedulers.pbt import PopulationBasedTraining
from nbdist.tune.schedulers.trial_scheduler import FIFOScheduler, TrialScheduler

__all__ = [
    "ASHAScheduler",
    "AsyncHyperBandScheduler",
    "FIFOScheduler",
    "HyperBandScheduler",
    "MedianStoppingRule",
    "PopulationBasedTraining",
    "TrialScheduler",
    "create_scheduler",
]

_BY_NAME = {
    "fifo": FIFOScheduler,
    "async_hyperband": AsyncHyperBandScheduler,
    "asynchyperband": AsyncHyperBandScheduler,
    "hyperband": HyperBandScheduler,
    "median_stopping_rule": MedianStoppingRule,
    "medianstopping": MedianStoppingRule,
    "pbt": PopulationBasedTraining,
    "pb2": PB2,  # says it is not implemented
}


def create_scheduler(scheduler: str, **kwargs: Any) -> TrialScheduler:
    """A scheduler by name, as Ray's ``tune.create_scheduler`` (``"async_hyperband"``, ...);
    arguments the class does not take are dropped, as Ray drops them."""
    name = scheduler.lower()
    if name not in _BY_NAME:
        raise ValueError(f"unknown scheduler {scheduler!r}; one of {sorted(_BY_NAME)}")
    cls = _BY_NAME[name]
    accepted = inspect.signature(cls).parameters
    made: TrialScheduler = cls(**{k: v for k, v in kwargs.items() if k in accepted})
    return made

"""``OptunaSearch``: nbdist search spaces sampled by optuna (the ``tune`` extra)."""

from nbdist.tune.search.optuna.optuna_search import OptunaSearch

__all__ = ["OptunaSearch"]

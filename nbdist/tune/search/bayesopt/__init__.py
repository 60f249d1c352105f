"""``BayesOptSearch``: Gaussian-process search by bayesian-optimization (the ``tune`` extra)."""

from nbdist.tune.search.bayesopt.bayesopt_search import BayesOptSearch

__all__ = ["BayesOptSearch"]

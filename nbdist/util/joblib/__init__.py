"""``nbdist.util.joblib``: joblib's ``Parallel`` on nbdist (Ray's ``ray.util.joblib``).

    from nbdist.util.joblib import register_ray
    register_ray()
    with joblib.parallel_backend("ray"):       # or "nbdist"
        scores = cross_val_score(model, X, y, n_jobs=-1)

Each batch of calls joblib makes becomes one nbdist task (see `backend`), so the work spreads
over the cluster the driver is attached to (``init(address=...)``), or a local one started on
first use. joblib is imported only here, on use: it is not needed by the rest of nbdist.
"""

from __future__ import annotations

from typing import Any

BACKEND_NAMES = ("ray", "nbdist")


def register_ray() -> None:
    """Register the backend with joblib as "ray" (and "nbdist"), for
    ``joblib.parallel_backend("ray")`` / ``joblib.parallel_config(backend="ray")``."""
    try:
        from joblib import register_parallel_backend
    except ImportError:
        raise ImportError(
            "nbdist.util.joblib needs joblib, which is not installed in this environment: "
            "pip install joblib (scikit-learn brings it too).") from None
    from nbdist.util.joblib.backend import NbdistBackend

    for name in BACKEND_NAMES:
        register_parallel_backend(name, NbdistBackend)


def __getattr__(name: str) -> Any:
    if name in ("NbdistBackend", "RayBackend"):
        from nbdist.util.joblib.backend import NbdistBackend

        return NbdistBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["register_ray"]

"""as_completed / map_unordered: results as soon as they are ready (Ray's ``ray.util``
helpers of the same names).

Both loop over ``nbdist.wait(refs, num_returns=chunk_size)``: each round yields the refs (or
their values) that are ready, in the order they were given, and keeps waiting on the rest.
``map_unordered`` also bounds the work in flight: once ``backpressure_size`` calls are
outstanding it yields a ready batch before submitting more, so a long input never floods the
cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from nbdist.driver import api

DEFAULT_CHUNK_SIZE = 10
DEFAULT_BACKPRESSURE_SIZE = 100


def _check(chunk_size: int, kwargs: dict[str, Any]) -> None:
    if chunk_size < 1:
        raise ValueError("`chunk_size` must be >= 1")
    if "num_returns" in kwargs:
        raise ValueError("Use the `chunk_size` argument instead of `num_returns`.")


def _next_batch(refs: list[Any], chunk_size: int, yield_obj_refs: bool,
                kwargs: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    ready, rest = api.wait(refs, num_returns=min(chunk_size, len(refs)), **kwargs)
    return (ready if yield_obj_refs else api.get(ready)), rest


def as_completed(refs: Sequence[Any], *, chunk_size: int = DEFAULT_CHUNK_SIZE,
                 yield_obj_refs: bool = False, **kwargs: Any) -> Iterator[Any]:
    """The values of ``refs`` (or the refs, with ``yield_obj_refs``) batch by batch as they
    are ready; ``kwargs`` (``timeout``, ``fetch_local``) go to ``nbdist.wait``."""
    _check(chunk_size, kwargs)
    pending = list(refs)
    while pending:
        batch, pending = _next_batch(pending, chunk_size, yield_obj_refs, kwargs)
        yield from batch


def map_unordered(fn: Any, items: Iterable[Any], *,
                  backpressure_size: int | None = DEFAULT_BACKPRESSURE_SIZE,
                  chunk_size: int = DEFAULT_CHUNK_SIZE, yield_obj_refs: bool = False,
                  **kwargs: Any) -> Iterator[Any]:
    """``fn.remote(item)`` for every item, yielding results as they are ready, with at most
    ``backpressure_size`` calls in flight (None: no bound)."""
    if backpressure_size is not None and backpressure_size <= 0:
        raise ValueError("backpressure_size must be positive.")
    _check(chunk_size, kwargs)
    bound = float("inf") if backpressure_size is None else backpressure_size
    pending: list[Any] = []
    for item in items:
        pending.append(fn.remote(item))
        if len(pending) >= bound:
            batch, pending = _next_batch(pending, chunk_size, yield_obj_refs, kwargs)
            yield from batch
    yield from as_completed(pending, chunk_size=chunk_size, yield_obj_refs=yield_obj_refs,
                            **kwargs)

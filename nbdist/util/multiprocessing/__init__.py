"""``nbdist.util.multiprocessing``: the stdlib ``multiprocessing.Pool`` API on the cluster
(Ray's ``ray.util.multiprocessing``); see pool.py."""

from __future__ import annotations

from multiprocessing import JoinableQueue, TimeoutError

from nbdist.util.multiprocessing.pool import AsyncResult, IMapIterator, Pool

__all__ = ["AsyncResult", "IMapIterator", "JoinableQueue", "Pool", "TimeoutError"]

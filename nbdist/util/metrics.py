"""``nbdist.util.metrics``: Ray's application metrics (Counter, Gauge, Histogram).

A metric is declared anywhere (the driver, a task, an actor) with a name, a description and the
keys of its tags; each record names a value for every key (``tags=`` over the metric's default
tags). Where the values go:

    process (driver, worker)        a batch of pending updates per (metric, tags), under a lock:
         │                          counters add, gauges keep the last value, histograms count
         │  every FLUSH_S, at exit, per bucket
         ▼  and on snapshot()
    aggregator actor                one detached actor per cluster (``AGGREGATOR`` in namespace
                                    ``NAMESPACE``, no CPU): the cluster's totals
         ▼
    snapshot() in the driver        rows for ``%nbdist status`` and the panel

The aggregator is created by the first process that flushes (``get_if_exists``), so metrics
cost nothing until one is recorded, and `snapshot` never creates it. On the Ray backend each
record also goes to Ray's own ``ray.util.metrics`` metric of the same name, so Ray's metrics
export (Prometheus, its dashboard) sees it too.
"""

from __future__ import annotations

import atexit
import bisect
import re
import sys
import threading
import warnings
from typing import Any

import nbdist
from nbdist.exceptions import ActorError

AGGREGATOR = "nbdist_metrics"
NAMESPACE = "_nbdist_metrics"
FLUSH_S = 0.25
_NAME_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")

Key = tuple[str, tuple[tuple[str, str], ...]]


class _Aggregator:
    """The cluster's totals: one row per (metric, tags)."""

    def __init__(self) -> None:
        self.rows: dict[Key, dict[str, Any]] = {}

    def add(self, batch: list[tuple[Key, dict[str, Any]]]) -> None:
        for key, update in batch:
            row = self.rows.get(key)
            if row is None:
                self.rows[key] = {**update, "name": key[0], "tags": dict(key[1])}
            elif update["kind"] == "counter":
                row["value"] += update["value"]
            elif update["kind"] == "gauge":
                row["value"] = update["value"]
            else:
                row["count"] += update["count"]
                row["sum"] += update["sum"]
                row["buckets"] = [a + b for a, b in
                                  zip(row["buckets"], update["buckets"], strict=True)]

    def snapshot(self) -> list[dict[str, Any]]:
        return [dict(row) for _, row in sorted(self.rows.items())]


class _Recorder:
    """This process's updates not yet sent to the aggregator."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending: dict[Key, dict[str, Any]] = {}
        self.timer: threading.Timer | None = None
        self.actor: Any = None

    def record(self, key: Key, kind: str, value: float, meta: dict[str, Any]) -> None:
        with self.lock:
            row = self.pending.get(key)
            if row is None:
                row = self.pending[key] = _empty(kind, meta)
            if kind == "counter":
                row["value"] += value
            elif kind == "gauge":
                row["value"] = value
            else:
                row["count"] += 1
                row["sum"] += value
                row["buckets"][bisect.bisect_left(meta["boundaries"], value)] += 1
            if self.timer is None:
                self.timer = threading.Timer(FLUSH_S, self.flush)
                self.timer.daemon = True
                self.timer.start()

    def flush(self) -> None:
        """Send the pending updates and wait until the aggregator has them. Two processes
        may create the aggregator at once: the one whose creation lost finds its actor dead
        and sends to the one registered under the name."""
        with self.lock:
            batch, self.pending, self.timer = list(self.pending.items()), {}, None
        if not batch or not nbdist.is_initialized():
            return
        error: Exception | None = None
        for attempt in range(3):
            try:
                if self.actor is None:
                    self.actor = _aggregator(create=attempt == 0)
                nbdist.get(self.actor.add.options(library_call="metrics").remote(batch),
                           timeout=30)
                return
            except (ValueError, ActorError) as exc:
                self.actor, error = None, exc
            except Exception as exc:  # the cluster went away: the values go with it
                self.actor, error = None, exc
                break
        warnings.warn(f"nbdist.util.metrics: {len(batch)} update(s) not recorded: {error}",
                      RuntimeWarning, stacklevel=2)


def _empty(kind: str, meta: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"kind": kind, "description": meta["description"]}
    if kind == "histogram":
        row.update(count=0, sum=0.0, boundaries=list(meta["boundaries"]),
                   buckets=[0] * (len(meta["boundaries"]) + 1))
    else:
        row["value"] = 0.0
    return row


_recorder = _Recorder()
atexit.register(_recorder.flush)


def _aggregator(create: bool) -> Any:
    if not create:
        return nbdist.get_actor(AGGREGATOR, namespace=NAMESPACE)
    cls = nbdist.remote(num_cpus=0, name=AGGREGATOR, namespace=NAMESPACE, lifetime="detached",
                        get_if_exists=True, max_restarts=-1, library_call="metrics")(_Aggregator)
    return cls.remote()


def snapshot() -> list[dict[str, Any]]:
    """The cluster's metrics as rows, sorted by name then tags: ``name``, ``kind``
    ("counter", "gauge" or "histogram"), ``description``, ``tags``, and ``value`` (counters,
    gauges) or ``count``, ``sum``, ``boundaries``, ``buckets`` (histograms; one more bucket than
    boundaries: values above the last). Empty when nothing was recorded."""
    _recorder.flush()
    for _ in range(3):
        try:
            actor = _aggregator(create=False)
        except ValueError:
            return []
        try:
            return list(nbdist.get(actor.snapshot.options(library_call="metrics").remote(),
                                   timeout=30))
        except ActorError:  # a creation that lost the race for the name: ask again
            continue
    return []


class Metric:
    """What Counter, Gauge and Histogram share: a name, tag keys and default tags."""

    _kind = ""

    def __init__(self, name: str, description: str = "",
                 tag_keys: tuple[str, ...] | None = None) -> None:
        if not name:
            raise ValueError("Empty name is not allowed. Please provide a metric name.")
        if not _NAME_RE.match(name):
            raise ValueError(f"Invalid metric name {name!r}: letters, digits and _ only, not "
                             "starting with a digit.")
        self._name = name
        self._description = description
        self._tag_keys = tag_keys or ()
        if not isinstance(self._tag_keys, tuple):
            raise TypeError(f"tag_keys should be a tuple, got {type(self._tag_keys).__name__}.")
        for key in self._tag_keys:
            if not isinstance(key, str):
                raise TypeError(f"Tag keys must be str, got {type(key).__name__}.")
        self._default_tags: dict[str, str] = {}
        self._meta: dict[str, Any] = {"description": description}
        self._ray: Any = None

    def set_default_tags(self, default_tags: dict[str, str]) -> Metric:
        for key, val in default_tags.items():
            if key not in self._tag_keys:
                raise ValueError(f"Unrecognized tag key {key!r} (tag keys: {self._tag_keys}).")
            if not isinstance(val, str):
                raise TypeError(f"Tag values must be str, got {type(val).__name__}.")
        self._default_tags = dict(default_tags)
        return self

    @property
    def info(self) -> dict[str, Any]:
        return {"name": self._name, "description": self._description,
                "tag_keys": self._tag_keys, "default_tags": self._default_tags}

    def _record(self, value: float, tags: dict[str, str] | None) -> None:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise TypeError(f"value must be int or float, got {type(value).__name__}.")
        final = {**self._default_tags, **(tags or {})}
        for val in final.values():
            if not isinstance(val, str):
                raise TypeError(f"Tag values must be str, got {type(val).__name__}.")
        missing = [k for k in self._tag_keys if k not in final]
        if missing:
            raise ValueError(f"Missing value for tag key(s): {','.join(missing)}.")
        key = (self._name, tuple(sorted(final.items())))
        _recorder.record(key, self._kind, float(value), self._meta)
        self._to_ray(value, final)

    def _to_ray(self, value: float, tags: dict[str, str]) -> None:
        ray = sys.modules.get("ray")
        if ray is None or not ray.is_initialized():
            return
        if self._ray is None:
            from ray.util import metrics as ray_metrics

            self._ray = self._ray_metric(ray_metrics)
        self._ray_record(value, tags)

    def _ray_metric(self, ray_metrics: Any) -> Any:
        raise NotImplementedError

    def _ray_record(self, value: float, tags: dict[str, str]) -> None:
        raise NotImplementedError

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), self._args(), self._default_tags))

    def _args(self) -> tuple:
        return (self._name, self._description, self._tag_keys)


def _rebuild(cls: type[Metric], args: tuple, default_tags: dict[str, str]) -> Metric:
    return cls(*args).set_default_tags(default_tags)


class Counter(Metric):
    """A cumulative count that only goes up (Ray's ``Counter``)."""

    _kind = "counter"

    def inc(self, value: float = 1.0, tags: dict[str, str] | None = None) -> None:
        if isinstance(value, (int, float)) and value <= 0:
            raise ValueError(f"value must be >0, got {value}")
        self._record(value, tags)

    def _ray_metric(self, ray_metrics: Any) -> Any:
        return ray_metrics.Counter(self._name, self._description, self._tag_keys)

    def _ray_record(self, value: float, tags: dict[str, str]) -> None:
        self._ray.inc(value, tags)


class Gauge(Metric):
    """The current value of something (Ray's ``Gauge``)."""

    _kind = "gauge"

    def set(self, value: float | None, tags: dict[str, str] | None = None) -> None:
        if value is None:
            return
        self._record(value, tags)

    def _ray_metric(self, ray_metrics: Any) -> Any:
        return ray_metrics.Gauge(self._name, self._description, self._tag_keys)

    def _ray_record(self, value: float, tags: dict[str, str]) -> None:
        self._ray.set(value, tags)


class Histogram(Metric):
    """Observed values counted in buckets (Ray's ``Histogram``): bucket i counts values up to
    ``boundaries[i]``, the last one the values above every boundary."""

    _kind = "histogram"

    def __init__(self, name: str, description: str = "", boundaries: list[float] | None = None,
                 tag_keys: tuple[str, ...] | None = None) -> None:
        super().__init__(name, description, tag_keys)
        if not boundaries:
            raise ValueError("boundaries argument should be provided when using the Histogram "
                             "class, e.g. Histogram(\"name\", boundaries=[1.0, 2.0])")
        for i, boundary in enumerate(boundaries):
            if boundary <= 0:
                raise ValueError(f"Invalid `boundaries` argument at index {i}, {boundaries}. "
                                 "Use positive values for the arguments.")
        self.boundaries = sorted(boundaries)
        self._meta["boundaries"] = self.boundaries

    def observe(self, value: float, tags: dict[str, str] | None = None) -> None:
        self._record(value, tags)

    def _args(self) -> tuple:
        return (self._name, self._description, self.boundaries, self._tag_keys)

    def _ray_metric(self, ray_metrics: Any) -> Any:
        return ray_metrics.Histogram(self._name, self._description, self.boundaries,
                                     self._tag_keys)

    def _ray_record(self, value: float, tags: dict[str, str]) -> None:
        self._ray.observe(value, tags)


__all__ = ["Counter", "Gauge", "Histogram", "Metric", "snapshot"]

"""Idle training workers kept between ``fit()`` calls of a driver, so a later run skips the
process start and the framework import (``import torch`` is ~2.5 s of CPU per process).

A run's gang is still reserved whole in a placement group for the run's duration; a reusable
worker is an actor that holds no resources of its own (``num_cpus=0``), pinned to the node of
the bundle it serves, so that between runs it holds nothing the cluster could schedule. Only
workers of a run that ended cleanly come back (a failed or interrupted group is killed, as its
state is unknown), and only to a run of the same backend type. A worker is not taken again when
a module it imported from outside the Python installation was modified after the worker
started (an edited ``model.py`` must be re-imported, which only a fresh process does); it is
killed instead.

Workers can also be prepared ahead of a driver's first ``fit()`` (`worker_group.prewarm`, on
``import nbdist.train.torch``): they start on the driver's node, import the framework at once,
and wait in the pool beside the idle ones, so the first run takes them as a later run takes
the idle workers of an earlier one. A run takes an idle worker before a prepared one (a run of
the same shape then gives each process its old rank), and it takes a prepared worker whose
import is still running rather than start another: the run's set-up waits for that import in
the worker, and a second set of processes importing at once would only share the same cores.

The pool lives in the driver's process and belongs to one connection to one cluster (the job
and the driver's node): the workers are actors the driver owns, so they end with the driver, on
``nbdist.shutdown()`` and with the kernel. ``NBDIST_TRAIN_REUSE_WORKERS=0`` turns reuse, and
preparing, off; ``NBDIST_TRAIN_PREWARM=N`` sets how many workers are prepared (0: none).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Any

import nbdist

logger = logging.getLogger(__name__)

REUSE_ENV = "NBDIST_TRAIN_REUSE_WORKERS"
PREWARM_ENV = "NBDIST_TRAIN_PREWARM"
# At most this many workers are prepared by default (see `prewarm_count`).
PREWARM_DEFAULT = 2

_lock = threading.Lock()
_owner: tuple[str, str] | None = None
# (node id, backend type name) -> idle worker actors on that node.
_idle: dict[tuple[str, str], list[Any]] = {}
# The same for prepared workers no run has taken yet.
_prepared: dict[tuple[str, str], list[Any]] = {}
# Backend type name -> the refs of its prepared workers' imports (done or not), for
# `wait_prepared`; a type is prepared once per connection, whatever became of its workers.
_preparing: dict[str, list[Any]] = {}
# Handles of a previous connection's workers (which ended with it) are kept, not dropped:
# dropping a handle releases a reference in the current runtime, where the same actor id may
# name a new actor.
_previous: list[Any] = []


def enabled(bundle: dict[str, float]) -> bool:
    """Whether workers of this bundle can be pooled: CPUs only (a worker that holds GPUs or
    custom resources must hold them itself, so it lives in its bundle), reuse not off, and
    ``fit()`` called by the driver itself (a pool in a task or actor, a Tune trial's included,
    would outlive what it was for in a process the driver does not see)."""
    if os.environ.get(REUSE_ENV, "1") == "0" or not set(bundle) <= {"CPU"}:
        return False
    context = nbdist.get_runtime_context()
    return context.get_task_id() is None and context.get_actor_id() is None


def _connection() -> tuple[str, str]:
    context = nbdist.get_runtime_context()
    return context.get_job_id(), context.get_node_id()


def _current() -> dict[tuple[str, str], list[Any]]:
    """The pool of this connection; one of a previous connection holds only dead handles."""
    global _owner
    owner = _connection()
    if owner != _owner:
        _previous.extend(a for pool in (_idle, _prepared) for ws in pool.values() for a in ws)
        _previous.extend(ref for refs in _preparing.values() for ref in refs)
        _idle.clear()
        _prepared.clear()
        _preparing.clear()
        _owner = owner
    return _idle


def take(node_id: str, kind: str) -> Any | None:
    """A worker on ``node_id`` for a backend of type ``kind``, or None: an idle one, in the
    order they were given back, so that a run of the same shape gives each process its old
    rank; else a prepared one, in the order they were started, ready or still importing."""
    with _lock:
        for workers in (_current().get((node_id, kind)), _prepared.get((node_id, kind))):
            if workers:
                return workers.pop(0)
        return None


def give_back(node_id: str, kind: str, actor: Any) -> None:
    with _lock:
        _current().setdefault((node_id, kind), []).append(actor)


def prewarm_count(driver_node_cpus: float) -> int:
    """How many workers to prepare: ``NBDIST_TRAIN_PREWARM``, else the driver node's CPUs up
    to 2. A gang of 1-CPU workers fits on that node only up to its CPU count, and more
    processes importing at once than there are cores take longer each; 2 serves the common
    notebook run (2 DDP workers) while each prepared torch process holds ~220 MiB of memory
    until a run takes it or the driver ends."""
    value = os.environ.get(PREWARM_ENV)
    if value is not None:
        try:
            return max(0, int(value))
        except ValueError:
            logger.warning("%s=%r is not a number of workers; using the default", PREWARM_ENV,
                           value)
    return min(PREWARM_DEFAULT, int(driver_node_cpus))


def begin_prewarm(kind: str) -> bool:
    """Whether workers of type ``kind`` should be prepared now: reuse is on, the caller is the
    driver (not a task, an actor or a Tune trial) connected to a cluster, and none were
    prepared for ``kind`` in this connection yet. Claims ``kind`` for the caller."""
    if not nbdist.is_initialized() or not enabled({"CPU": 1.0}):
        return False
    with _lock:
        _current()
        if kind in _preparing:
            return False
        _preparing[kind] = []
        return True


def add_prepared(node_id: str, kind: str, actor: Any, ready: Any) -> None:
    """A prepared worker, and the ref of the call that imports its framework."""
    with _lock:
        _current()
        _prepared.setdefault((node_id, kind), []).append(actor)
        _preparing.setdefault(kind, []).append(ready)


def wait_prepared(kind: str, timeout: float | None = None) -> bool:
    """Wait up to ``timeout`` s (None: no limit) until every worker prepared for ``kind`` in
    this connection has finished its import; True when none is importing any more (or none
    was prepared), False on timeout. A prepared worker that a run took counts as well."""
    if not nbdist.is_initialized():
        return True
    with _lock:
        _current()
        refs = list(_preparing.get(kind, []))
    if not refs:
        return True
    with nbdist.events.library_call("train"):  # Train's own wait (`nbdist.events.marks`)
        _, pending = nbdist.wait(refs, num_returns=len(refs), timeout=timeout)
    return not pending


def clear() -> None:
    """End every idle and prepared worker of this driver (their memory is returned)."""
    with _lock:
        actors = [a for pool in (_idle, _prepared) for ws in pool.values() for a in ws]
        _idle.clear()
        _prepared.clear()
    for actor in actors:
        try:
            nbdist.kill(actor)
        except Exception:  # already gone with its cluster
            logger.debug("kill of an idle worker failed", exc_info=True)


def modules_changed_after(when: float) -> list[str]:
    """The source files of modules imported in this process from outside the Python
    installation (the user's own code) that were modified after ``when`` (a ``time.time()``),
    or went away: a module edited while a process lived may be stale in it, whenever it was
    imported."""
    prefixes = tuple({sys.prefix, sys.base_prefix, sys.exec_prefix})
    changed = []
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        # Namespaces such as torch.ops carry a bare file name: only real source files count.
        if not isinstance(path, str) or not os.path.isabs(path) or path.startswith(prefixes):
            continue
        try:
            if os.stat(path).st_mtime > when:
                changed.append(path)
        except OSError:
            changed.append(path)
    return changed

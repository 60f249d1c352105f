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

The pool lives in the driver's process and belongs to one connection to one cluster (the job
and the driver's node): the workers are actors the driver owns, so they end with the driver, on
``nbdist.shutdown()`` and with the kernel. ``NBDIST_TRAIN_REUSE_WORKERS=0`` turns reuse off.
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

_lock = threading.Lock()
_owner: tuple[str, str] | None = None
# (node id, backend type name) -> idle worker actors on that node.
_idle: dict[tuple[str, str], list[Any]] = {}
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
        _previous.extend(a for workers in _idle.values() for a in workers)
        _idle.clear()
        _owner = owner
    return _idle


def take(node_id: str, kind: str) -> Any | None:
    """An idle worker on ``node_id`` for a backend of type ``kind``, or None; in the order
    they were given back, so that a run of the same shape gives each process its old rank."""
    with _lock:
        workers = _current().get((node_id, kind))
        return workers.pop(0) if workers else None


def give_back(node_id: str, kind: str, actor: Any) -> None:
    with _lock:
        _current().setdefault((node_id, kind), []).append(actor)


def clear() -> None:
    """End every idle worker of this driver (their memory is returned)."""
    with _lock:
        actors = [a for workers in _idle.values() for a in workers]
        _idle.clear()
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

"""Where a run's checkpoints are written, and how a round's checkpoint becomes final.

A run's directory (``storage_path/name``) holds its committed checkpoints
(``checkpoint_NNNNNN``, numbered by round across restarts, or the ``checkpoint_dir_name`` of
the round's first rank with a checkpoint) beside ``result_snapshot.json``. The driver and the
workers must see the same directory (one machine, or a file system every node shares, as Ray
Train asks of ``storage_path`` on a multi-node cluster).

- Workers (``train.report``) copy a reported directory into their attempt's staging directory
  (``.attempt-<id>/<name>`` under the run's), file by file, each file written under a
  temporary name and renamed into place (`stage`): the ranks that report files in one round
  add them to one directory (a sharded checkpoint), two ranks writing the same file leave one
  whole copy, and a worker killed mid-copy leaves no half file under a final name.
- The driver commits a round once every rank has reported it (`commit`): the staged directory
  replaces whatever held its final name (a checkpoint of an earlier run of the same name) in
  one rename. A rank that named its checkpoint differently has its files merged into it.
- A finished attempt's staging directory is removed once its workers are gone (`discard`):
  it then holds only the files of rounds that not every rank reached, which a restart redoes.
"""

from __future__ import annotations

import os
import shutil
import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .context import Report

STAGING_PREFIX = ".attempt-"


def staging_dir(run_dir: str) -> str:
    """A new attempt's staging directory (not created until a worker stages into it)."""
    return os.path.join(run_dir, f"{STAGING_PREFIX}{uuid.uuid4().hex[:12]}")


def stage(source: str, staging: str, name: str) -> str:
    """Add the files of ``source`` to ``staging/name``; returns that directory."""
    target = os.path.join(staging, name)
    copy_files(source, target)
    return target


def copy_files(source: str, target: str) -> None:
    """Copy the files under ``source`` into ``target`` (created if missing), each one whole
    or not at all, beside what ``target`` holds already."""
    os.makedirs(target, exist_ok=True)
    token = uuid.uuid4().hex[:8]
    for folder, _, files in os.walk(source):
        into = os.path.normpath(os.path.join(target, os.path.relpath(folder, source)))
        os.makedirs(into, exist_ok=True)
        for name in files:
            partial = os.path.join(into, f".{name}.partial-{token}")
            shutil.copy2(os.path.join(folder, name), partial)
            os.replace(partial, os.path.join(into, name))


def commit(reports: list[Report]) -> str | None:
    """Make a complete round's checkpoint final; returns its path, None when no rank reported
    one. The round's checkpoint is that of its first rank with one (rank 0's, as a rule); the
    staged files of the others go into it. A checkpoint stored where the worker chose
    (``NO_UPLOAD``, an upload function) stays where it is."""
    chosen = next((r for r in reports if r.checkpoint_path is not None), None)
    if chosen is None:
        return None
    final = chosen.final_path or chosen.checkpoint_path
    assert final is not None
    placed: set[str] = set()  # final paths already written in this round
    for report in reports:
        source, target = report.checkpoint_path, report.final_path
        if source is None or target is None or not os.path.isdir(source):
            continue  # not staged, or staged by a rank that shares this directory (moved)
        if chosen.final_path is not None:
            target = final
        if target in placed:
            _merge(source, target)
        else:
            placed.add(target)
            shutil.rmtree(target, ignore_errors=True)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.replace(source, target)
    return final


def _merge(source: str, target: str) -> None:
    copy_files(source, target)
    shutil.rmtree(source, ignore_errors=True)


def discard(staging: str) -> None:
    """Remove an ended attempt's staging directory and what is left in it."""
    shutil.rmtree(staging, ignore_errors=True)

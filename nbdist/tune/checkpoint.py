"""A checkpoint: a directory of files a trainable wrote, named by its path.

Ray Train/Tune's ``Checkpoint`` shape (``from_directory``, ``to_directory``, ``as_directory``,
``path``, metadata in a ``.metadata.json`` beside the files) on the local filesystem only: a
``Checkpoint`` is a plain picklable value holding a path, so it travels between a trial's
actor and the driver as a few bytes. Persisting (copying a worker's temporary directory under
the run's storage path) is the caller's job; this module imports nothing of ``nbdist.tune``
so ``nbdist.train`` can re-export it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

_METADATA_FILE = ".metadata.json"


class Checkpoint:
    """A reference to a directory holding a checkpoint's files."""

    def __init__(self, path: str | os.PathLike[str], filesystem: object = None) -> None:
        if filesystem is not None:
            raise ValueError(
                "nbdist checkpoints live on the local filesystem; pass a local path and "
                "filesystem=None")
        self.path = os.fspath(path)
        self.filesystem = None

    @classmethod
    def from_directory(cls, path: str | os.PathLike[str]) -> Checkpoint:
        """A checkpoint of the files in ``path`` (the directory is referenced, not copied)."""
        path = os.path.abspath(os.fspath(path))
        if not os.path.isdir(path):
            raise FileNotFoundError(f"checkpoint directory {path!r} does not exist")
        return cls(path)

    def to_directory(self, path: str | os.PathLike[str] | None = None) -> str:
        """Copy the checkpoint's files into ``path`` (a new temporary directory when None) and
        return that directory."""
        target = os.fspath(path) if path is not None else tempfile.mkdtemp(prefix="checkpoint_")
        os.makedirs(target, exist_ok=True)
        if os.path.abspath(target) != os.path.abspath(self.path):
            shutil.copytree(self.path, target, dirs_exist_ok=True)
        return target

    @contextlib.contextmanager
    def as_directory(self) -> Iterator[str]:
        """The checkpoint's files as a local directory for the ``with`` block: the directory
        itself (it is local), which the caller must treat as read-only."""
        yield self.path

    def get_metadata(self) -> dict[str, Any]:
        try:
            with open(os.path.join(self.path, _METADATA_FILE)) as f:
                data = json.load(f)
        except FileNotFoundError:
            return {}
        return data if isinstance(data, dict) else {}

    def set_metadata(self, metadata: dict[str, Any]) -> None:
        with open(os.path.join(self.path, _METADATA_FILE), "w") as f:
            json.dump(metadata, f)

    def update_metadata(self, metadata: dict[str, Any]) -> None:
        merged = self.get_metadata()
        merged.update(metadata)
        self.set_metadata(merged)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Checkpoint) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def __repr__(self) -> str:
        return f"Checkpoint(filesystem=local, path={self.path})"

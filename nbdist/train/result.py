"""``Result``: what ``fit()`` returns."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from nbdist.tune.checkpoint import Checkpoint

from .errors import TrainingFailedError

# What a run leaves in its directory for `Result.from_path`: its reports and kept checkpoints.
SNAPSHOT_NAME = "result_snapshot.json"


@dataclass
class Result:
    """What ``fit()`` returns: rank 0's last metrics, the latest and the kept checkpoints."""

    metrics: dict[str, Any] | None
    checkpoint: Checkpoint | None
    error: TrainingFailedError | None = None
    path: str = ""
    best_checkpoints: list[tuple[Checkpoint, dict[str, Any]]] = field(default_factory=list)
    return_value: Any = None
    history: list[dict[str, Any]] = field(default_factory=list, repr=False)
    _frame: Any = field(default=None, repr=False, compare=False)

    @property
    def metrics_dataframe(self) -> Any:
        """Rank 0's reports, one row each, built once. pandas is imported on first use, not
        by ``fit()``: a driver's first ``import pandas`` takes over a second of CPU."""
        if self._frame is None:
            import pandas

            self._frame = pandas.DataFrame(self.history)
        return self._frame

    def get_best_checkpoint(self, metric: str, mode: str) -> Checkpoint | None:
        """The kept checkpoint whose metrics have the best ``metric`` (``mode``: max or min)."""
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', not {mode!r}")
        scored = [(m[metric], c) for c, m in self.best_checkpoints if metric in m]
        if not scored:
            return None
        best = (max if mode == "max" else min)(scored, key=lambda pair: pair[0])
        return best[1]

    @property
    def filesystem(self) -> Any:
        """The file system ``path`` is on (pyarrow's, as Ray's): always the local one."""
        import pyarrow.fs

        return pyarrow.fs.LocalFileSystem()

    @property
    def config(self) -> dict[str, Any] | None:
        """The run's ``train_loop_config``, as Ray's ``Result.config``."""
        return self._config

    _config: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], storage_filesystem: Any = None) -> Result:
        """The Result of the finished run whose directory is ``path`` (``Result.path``),
        read from what the run wrote there; without its error, as Ray's."""
        if storage_filesystem is not None:
            raise NotImplementedError("Result.from_path(storage_filesystem=...): only the "
                                      "local file system is supported.")
        folder = os.path.abspath(os.path.expanduser(os.fspath(path))).rstrip(os.sep)
        if not os.path.isdir(folder):
            raise RuntimeError(f"Experiment folder {folder} doesn't exist.")
        try:
            with open(os.path.join(folder, SNAPSHOT_NAME)) as f:
                snapshot = json.load(f)
        except FileNotFoundError:
            raise RuntimeError(f"Failed to restore the Result: {SNAPSHOT_NAME} doesn't exist "
                               f"in {folder}; it is not the directory of a training run.") from None
        kept = [(Checkpoint(os.path.join(folder, name)), metrics)
                for name, metrics in snapshot["kept"]]
        history = snapshot["history"]
        return cls(metrics=history[-1] if history else None,
                   checkpoint=kept[-1][0] if kept else None, path=folder,
                   best_checkpoints=kept, history=history)


def write_snapshot(run_dir: str, history: list[dict[str, Any]],
                   kept: list[tuple[Checkpoint, dict[str, Any]]]) -> None:
    """Record the run's reports and kept checkpoints (by name, so the directory can move)
    for `Result.from_path`; replaced whole, never left half written."""
    snapshot = {"history": history,
                "kept": [[os.path.relpath(c.path, run_dir), m] for c, m in kept]}
    partial = os.path.join(run_dir, f".{SNAPSHOT_NAME}.partial")
    with open(partial, "w") as f:
        json.dump(snapshot, f, default=repr, skipkeys=True)
    os.replace(partial, os.path.join(run_dir, SNAPSHOT_NAME))

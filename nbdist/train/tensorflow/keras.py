"""``ReportCheckpointCallback``: a Keras callback that reports ``model.fit``'s logs to the
run (``train.report``), with the model saved as a checkpoint (Ray Train's callback, also
importable as Ray's ``ray.air.integrations.keras`` one).

Imports TensorFlow's Keras, so it is loaded only when a training function asks for it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from tensorflow import keras

from nbdist.tune.checkpoint import Checkpoint

from .. import context

# Where a checkpoint made by this callback holds the model (Ray's file name).
MODEL_FILENAME = "model.keras"
_EVENTS = ("epoch_begin", "epoch_end", "train_batch_begin", "train_batch_end",
           "test_batch_begin", "test_batch_end", "predict_batch_begin", "predict_batch_end",
           "train_begin", "train_end", "test_begin", "test_end", "predict_begin",
           "predict_end")


def _events(value: str | list[str]) -> list[str]:
    names = [value] if isinstance(value, str) else list(value)
    unknown = [n for n in names if n not in _EVENTS]
    if unknown:
        raise ValueError(f"Unknown Keras event(s) {unknown}: use some of {list(_EVENTS)}.")
    return names


class ReportCheckpointCallback(keras.callbacks.Callback):
    """Report the Keras logs on ``report_metrics_on`` events and, with a checkpoint of the
    model (``model.keras`` in it), on ``checkpoint_on`` events. ``metrics``: None (every
    log), a name, a list of names, or ``{reported name: Keras name}``."""

    def __init__(self, checkpoint_on: str | list[str] = "epoch_end",
                 report_metrics_on: str | list[str] = "epoch_end",
                 metrics: str | list[str] | dict[str, str] | None = None) -> None:
        super().__init__()
        self._checkpoint_on = _events(checkpoint_on)
        self._report_on = _events(report_metrics_on)
        self._metrics = metrics

    def _selected(self, logs: dict[str, Any]) -> dict[str, Any]:
        if self._metrics is None:
            chosen = dict(logs)
        elif isinstance(self._metrics, str):
            chosen = {self._metrics: logs[self._metrics]}
        elif isinstance(self._metrics, list):
            chosen = {m: logs[m] for m in self._metrics}
        else:
            chosen = {key: logs[m] for key, m in self._metrics.items()}
        return {k: float(v) if hasattr(v, "__float__") else v for k, v in chosen.items()}

    def _handle(self, logs: dict[str, Any] | None, event: str) -> None:
        if event not in self._checkpoint_on and event not in self._report_on:
            return
        logs = logs or {}
        metrics = self._selected(logs)
        if event not in self._checkpoint_on:
            context.report(metrics)
            return
        folder = tempfile.mkdtemp(prefix="nbdist-keras-")
        try:
            self.model.save(os.path.join(folder, MODEL_FILENAME))
            context.report(metrics, checkpoint=Checkpoint.from_directory(folder))
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def _hook(event: str) -> Any:
    # Keras calls on_<event>(epoch or batch, logs) for epochs and batches, on_<event>(logs)
    # for the rest.
    if "batch" in event or event.startswith("epoch"):
        def on_step(self: ReportCheckpointCallback, step: int, logs: Any = None) -> None:
            self._handle(logs, event)
        return on_step

    def on_phase(self: ReportCheckpointCallback, logs: Any = None) -> None:
        self._handle(logs, event)
    return on_phase


for _event in _EVENTS:
    setattr(ReportCheckpointCallback, f"on_{_event}", _hook(_event))


def prepare_dataset_shard(tf_dataset_shard: Any) -> Any:
    """``tf_dataset_shard`` with TensorFlow's automatic sharding off: the dataset is this
    worker's share already, and the strategy would otherwise split it again."""
    import tensorflow as tf

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return tf_dataset_shard.with_options(options)

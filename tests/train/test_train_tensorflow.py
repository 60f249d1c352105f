"""TensorFlow through nbdist.train with real worker processes: the seed's ``Trainer`` program
training the seed's LeNet under MultiWorkerMirroredStrategy for a few steps.

TensorFlow takes 10-15 s to import in each worker (more on a loaded machine), so this file
runs one TensorFlow group; ``TF_CONFIG`` alone is checked without importing TensorFlow.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import train_helpers
from polling import poll

from nbdist import train
from nbdist.train.tensorflow import TensorflowTrainer

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("cluster")]

LENET_PARAMETERS = 44_426
STEPS = 6


def train_func() -> dict[str, Any]:
    """The seed's LeNet (conv 5x5x6, pool, conv 5x5x16, pool, dense 120, 84, 10) on synthetic
    28x28 images, trained with a custom loop: Keras 3's ``fit`` does not support
    MultiWorkerMirroredStrategy, ``strategy.run`` does."""
    import numpy as np
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = tf.keras.Sequential([
            tf.keras.Input((28, 28, 1)),
            tf.keras.layers.Conv2D(6, 5, activation="relu"), tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Conv2D(16, 5, activation="relu"), tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Flatten(), tf.keras.layers.Dense(120, activation="relu"),
            tf.keras.layers.Dense(84, activation="relu"), tf.keras.layers.Dense(10)])
        optimizer = tf.keras.optimizers.SGD(0.05)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    rng = np.random.default_rng(0)
    x = rng.random((512, 28, 28, 1), dtype=np.float32)
    y = (x.mean(axis=(1, 2, 3)) * 20).astype(np.int64) % 10
    batches = iter(strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((x, y)).batch(64).repeat()))

    def replica_step(xb: Any, yb: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(loss_fn(yb, model(xb, training=True)),
                                              global_batch_size=64)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def step() -> Any:
        xb, yb = next(batches)
        return strategy.reduce(tf.distribute.ReduceOp.SUM,
                               strategy.run(replica_step, args=(xb, yb)), axis=None)

    losses = [float(step()) for _ in range(STEPS)]
    return {"parameters": model.count_params(), "losses": losses,
            "weights": [v.numpy() for v in model.trainable_variables],
            "replicas": strategy.num_replicas_in_sync, "pid": os.getpid(),
            "tf_config": json.loads(os.environ["TF_CONFIG"])}


def test_the_seeds_trainer_program_trains_lenet_with_multi_worker_mirrored_strategy() -> None:
    trainer = train.Trainer(backend="tensorflow", num_workers=2)
    trainer.start()
    results = trainer.run(train_func)
    trainer.shutdown()

    assert [r["parameters"] for r in results] == [LENET_PARAMETERS] * 2
    assert [r["replicas"] for r in results] == [2, 2]
    assert [r["tf_config"]["task"] for r in results] == [
        {"type": "worker", "index": 0}, {"type": "worker", "index": 1}]
    assert results[0]["tf_config"]["cluster"] == results[1]["tf_config"]["cluster"]
    losses = results[0]["losses"]
    assert losses == results[1]["losses"] and losses[-1] < losses[0], losses
    for mine, theirs in zip(results[0]["weights"], results[1]["weights"], strict=True):
        assert (mine == theirs).all(), "the replicas diverged"
    poll(lambda: not any(train_helpers.alive(r["pid"]) for r in results),
         what="the workers to end after shutdown()")


def tf_config() -> dict[str, Any]:
    return json.loads(os.environ["TF_CONFIG"])


def test_tensorflow_trainer_gives_each_worker_its_tf_config(tmp_path: Any) -> None:
    result = TensorflowTrainer(
        lambda: train.report({"tf": tf_config()}) or tf_config(),
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(storage_path=str(tmp_path))).fit()
    config = result.return_value
    assert config["task"] == {"type": "worker", "index": 0}
    workers = config["cluster"]["worker"]
    assert len(workers) == 2 and len(set(workers)) == 2
    assert result.metrics == {"tf": config}

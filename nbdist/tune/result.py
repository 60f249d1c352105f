"""The names of the keys of a trial's result dict (Ray Tune's ``tune.result``).

Programs written for Ray read and set results by these constants rather than by string, e.g. a
``Callback`` asking for a checkpoint with ``result[SHOULD_CHECKPOINT] = True``; the values are
Ray's, so a result dict means the same on both.
"""

from __future__ import annotations

# Filled in by the runner for every report.
TRAINING_ITERATION = "training_iteration"
TIME_THIS_ITER_S = "time_this_iter_s"
TIME_TOTAL_S = "time_total_s"
TIMESTAMP = "timestamp"
TRIAL_ID = "trial_id"
HOSTNAME = "hostname"
PID = "pid"
NODE_IP = "node_ip"
EXPERIMENT_TAG = "experiment_tag"

# Set by a trainable (or, for SHOULD_CHECKPOINT, by a callback's ``on_trial_result``).
DONE = "done"
SHOULD_CHECKPOINT = "should_checkpoint"

# Metric names by convention.
DEFAULT_METRIC = "_metric"
EPISODE_REWARD_MEAN = "episode_reward_mean"
MEAN_LOSS = "mean_loss"
MEAN_ACCURACY = "mean_accuracy"
EPISODES_THIS_ITER = "episodes_this_iter"
EPISODES_TOTAL = "episodes_total"
TIMESTEPS_THIS_ITER = "timesteps_this_iter"
TIMESTEPS_TOTAL = "timesteps_total"

DEFAULT_RESULT_KEYS = (TRAINING_ITERATION, TIME_TOTAL_S, MEAN_ACCURACY, MEAN_LOSS)
AUTO_RESULT_KEYS = (
    TRAINING_ITERATION, TIME_TOTAL_S, EPISODES_TOTAL, TIMESTEPS_TOTAL, NODE_IP, HOSTNAME, PID,
    TIME_THIS_ITER_S, TIMESTAMP, "date", "time_since_restore", "timesteps_since_restore",
    "iterations_since_restore", "config", "checkpoint_dir_name",
)
DEFAULT_EXPERIMENT_NAME = "default"

# Files of a trial's directory.
EXPR_PARAM_FILE = "params.json"
EXPR_PARAM_PICKLE_FILE = "params.pkl"
EXPR_RESULT_FILE = "result.json"
EXPR_ERROR_FILE = "error.txt"

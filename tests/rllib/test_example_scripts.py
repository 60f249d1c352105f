"""An example script written as RLlib's (its argument parser, its run helper, ``import nbdist as
ray``) runs from the command line, with ``--no-tune`` and through Tune, stopping at
``--stop-iters``; ``--as-test`` fails when ``--stop-reward`` is not reached."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from polling import importable_env

SCRIPT = '''
import nbdist as ray
from nbdist.rllib.algorithms.ppo import PPOConfig
from nbdist.rllib.examples.utils import (
    add_rllib_example_script_args, run_rllib_example_script_experiment)

parser = add_rllib_example_script_args(default_reward=450.0, default_iters=50)
parser.set_defaults(num_env_runners=1)
args = parser.parse_args()
config = (PPOConfig().environment("CartPole-v1")
          .training(train_batch_size=200, minibatch_size=100, num_epochs=1)
          .rl_module(model_config={"fcnet_hiddens": [8]}))
result = run_rllib_example_script_experiment(config, args)
if args.no_tune:
    print("iterations", result["training_iteration"])
else:
    print("trials", len(result), "iterations", result[0].metrics["training_iteration"])
'''


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "ppo_example.py"
    script.write_text(SCRIPT)
    return subprocess.run([sys.executable, str(script), "--num-cpus=3", *args],
                          capture_output=True, text=True, timeout=150, cwd=tmp_path,
                          env=importable_env())


def test_example_script_without_tune_stops_at_stop_iters(tmp_path: Path) -> None:
    done = _run(tmp_path, "--no-tune", "--stop-iters=2")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "iterations 2" in done.stdout


def test_example_script_through_tune_and_as_test(tmp_path: Path) -> None:
    done = _run(tmp_path, "--stop-iters=1", "--num-env-runners=0", "--verbose=0")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "trials 1 iterations 1" in done.stdout
    failed = _run(tmp_path, "--no-tune", "--stop-iters=1", "--as-test", "--verbose=0")
    assert failed.returncode != 0
    assert "not reached" in failed.stderr

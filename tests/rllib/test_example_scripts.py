"""An example script written as RLlib's (its argument parser, its run helper, ``import nbdist as
ray``) runs from the command line, with ``--no-tune`` and through Tune, stopping at
``--stop-iters``; ``--as-test`` fails when ``--stop-reward`` is not reached. RLlib's
multi-agent CartPole example (``get_trainable_cls``, ``register_env``, ``MultiAgentCartPole``,
``DefaultModelConfig``, ``.multi_agent``) runs as Ray's is written."""

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


MULTI_AGENT_SCRIPT = '''
from nbdist.rllib.core.rl_module.default_model_config import DefaultModelConfig
from nbdist.rllib.examples.envs.classes.multi_agent import MultiAgentCartPole
from nbdist.rllib.utils.test_utils import (
    add_rllib_example_script_args, run_rllib_example_script_experiment)
from nbdist.tune.registry import get_trainable_cls, register_env

parser = add_rllib_example_script_args(default_iters=200, default_timesteps=100000,
                                       default_reward=600.0)
parser.add_argument("--num-policies", type=int, default=2)

if __name__ == "__main__":
    args = parser.parse_args()
    if args.num_agents > 0:
        register_env("env", lambda _: MultiAgentCartPole(config={"num_agents": args.num_agents}))
    base_config = (
        get_trainable_cls(args.algo).get_default_config()
        .environment("env" if args.num_agents > 0 else "CartPole-v1")
        .training(train_batch_size=200, minibatch_size=100, num_epochs=1)
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[8], vf_share_layers=True)))
    if args.num_agents > 0:
        base_config.multi_agent(policies={f"p{i}" for i in range(args.num_agents)},
                                policy_mapping_fn=lambda aid, *a, **kw: f"p{aid}")
    result = run_rllib_example_script_experiment(base_config, args)
    print("modules", sorted(result["env_runners"]["module_episode_returns_mean"]),
          "iterations", result["training_iteration"])
'''


def _run(tmp_path: Path, *args: str, source: str = SCRIPT) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "ppo_example.py"
    script.write_text(source)
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


def test_rllibs_multi_agent_cartpole_example_runs(tmp_path: Path) -> None:
    done = _run(tmp_path, "--no-tune", "--stop-iters=2", "--num-agents=2",
                "--num-env-runners=1", "--verbose=0", source=MULTI_AGENT_SCRIPT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "modules ['p0', 'p1'] iterations 2" in done.stdout

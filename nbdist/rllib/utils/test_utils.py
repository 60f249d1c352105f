"""The helpers of RLlib's example scripts: ``add_rllib_example_script_args`` (the common
command line: ``--stop-iters``, ``--stop-reward``, ``--stop-timesteps``, ``--num-env-runners``,
``--no-tune``, ``--as-test``, ...) and ``run_rllib_example_script_experiment`` (apply those
options to the script's config and run it, through Tune or, with ``--no-tune``, by calling
``train()`` in a loop). So an example written as RLlib's are::

    parser = add_rllib_example_script_args(default_reward=450.0)
    args = parser.parse_args()
    config = PPOConfig().environment("CartPole-v1")
    run_rllib_example_script_experiment(config, args)

runs with ``import nbdist as ray``.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

import nbdist

REWARD = "env_runners/episode_return_mean"
EVAL_REWARD = "evaluation/env_runners/episode_return_mean"
STEPS = "num_env_steps_sampled_lifetime"


def add_rllib_example_script_args(parser: argparse.ArgumentParser | None = None,
                                  default_reward: float = 100.0, default_iters: int = 200,
                                  default_timesteps: int = 100000) -> argparse.ArgumentParser:
    """RLlib's example-script arguments, added to ``parser`` (a new one if None)."""
    parser = parser or argparse.ArgumentParser()
    add = parser.add_argument
    add("--algo", type=str, default="PPO", help="the algorithm's name (if the script uses it)")
    add("--enable-new-api-stack", action="store_true", help="accepted: the only stack")
    add("--framework", choices=["torch"], default="torch")
    add("--env", type=str, default=None, help="the env (if the script uses it)")
    add("--num-env-runners", type=int, default=None)
    add("--num-envs-per-env-runner", type=int, default=None)
    add("--num-agents", type=int, default=0)
    add("--evaluation-num-env-runners", type=int, default=0)
    add("--evaluation-interval", type=int, default=0)
    add("--evaluation-duration", type=lambda v: v if v == "auto" else int(v), default=10)
    add("--evaluation-duration-unit", choices=["episodes", "timesteps"], default="episodes")
    add("--evaluation-parallel-to-training", action="store_true")
    add("--output", type=str, default=None)
    add("--log-level", choices=["INFO", "DEBUG", "WARN", "ERROR"], default=None)
    add("--no-tune", action="store_true", help="train() in a loop instead of Tune")
    add("--num-samples", type=int, default=1)
    add("--max-concurrent-trials", type=int, default=None)
    add("--verbose", type=int, default=2)
    add("--checkpoint-freq", type=int, default=0)
    add("--checkpoint-at-end", action="store_true")
    add("--wandb-key", type=str, default=None)
    add("--wandb-project", type=str, default=None)
    add("--wandb-run-name", type=str, default=None)
    add("--stop-reward", type=float, default=default_reward)
    add("--stop-iters", type=int, default=default_iters)
    add("--stop-timesteps", type=int, default=default_timesteps)
    add("--as-test", action="store_true", help="fail unless --stop-reward is reached")
    add("--as-release-test", action="store_true")
    add("--num-learners", type=int, default=None)
    add("--num-cpus-per-learner", type=int, default=None)
    add("--num-gpus-per-learner", type=float, default=None)
    add("--num-aggregator-actors-per-learner", type=int, default=None)
    add("--num-cpus", type=int, default=0)
    add("--num-gpus", type=int, default=0)
    add("--local-mode", action="store_true")
    add("--ray-address", type=str, default=None)
    return parser


def _apply_args(config: Any, args: argparse.Namespace) -> Any:
    if args.env is not None and config.env is None:
        config.environment(args.env)
    if args.num_env_runners is not None:
        config.env_runners(num_env_runners=args.num_env_runners)
    if args.num_envs_per_env_runner is not None:
        config.env_runners(num_envs_per_env_runner=args.num_envs_per_env_runner)
    if args.num_learners is not None:
        config.learners(num_learners=args.num_learners)
    if args.evaluation_interval:
        config.evaluation(evaluation_interval=args.evaluation_interval,
                          evaluation_duration=args.evaluation_duration,
                          evaluation_duration_unit=args.evaluation_duration_unit,
                          evaluation_num_env_runners=args.evaluation_num_env_runners)
    if args.log_level:
        config.debugging(log_level=args.log_level)
    return config


def _value(result: dict[str, Any], path: str) -> Any:
    value: Any = result
    for part in path.split("/"):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _reached(result: dict[str, Any], stop: dict[str, Any]) -> bool:
    for key, limit in stop.items():
        value = _value(result, key)
        if isinstance(value, (int, float)) and not math.isnan(value) and value >= limit:
            return True
    return False


def run_rllib_example_script_experiment(base_config: Any, args: argparse.Namespace | None = None,
                                        *, stop: dict[str, Any] | None = None,
                                        success_metric: dict[str, Any] | None = None,
                                        trainable: Any = None, tune_callbacks: Any = None,
                                        keep_config: bool = False, keep_ray_up: bool = False,
                                        scheduler: Any = None,
                                        progress_reporter: Any = None) -> Any:
    """Run the script's experiment with its command-line options: the last result dict with
    ``--no-tune``, else Tune's ``ResultGrid``. Stops at the first of ``--stop-reward`` (mean
    return), ``--stop-timesteps`` and ``--stop-iters`` (or ``stop``); with ``--as-test``,
    raises unless the reward was reached."""
    from nbdist import tune

    if args is None:
        args = add_rllib_example_script_args().parse_args()
    started = False
    if not nbdist.is_initialized():
        nbdist.init(num_cpus=args.num_cpus or None, address=args.ray_address)
        started = True
    config = base_config if keep_config else _apply_args(base_config, args)
    stop = stop or {REWARD: args.stop_reward, STEPS: args.stop_timesteps,
                    "training_iteration": args.stop_iters}
    success_metric = success_metric or {REWARD: args.stop_reward}
    try:
        if args.no_tune:
            algo = config.build_algo()
            try:
                result: dict[str, Any] = {}
                for _ in range(int(args.stop_iters)):
                    result = algo.train()
                    if args.verbose:
                        print(_summary(result))
                    if _reached(result, stop):
                        break
                if args.checkpoint_at_end:
                    print("checkpoint:", algo.save_to_path())
            finally:
                algo.stop()
            if args.as_test and not _reached(result, success_metric):
                raise ValueError(f"`{json.dumps(success_metric)}` not reached: "
                                 f"{_summary(result)}")
            return result
        checkpoint = tune.CheckpointConfig(checkpoint_frequency=args.checkpoint_freq,
                                           checkpoint_at_end=args.checkpoint_at_end)
        tuner = tune.Tuner(trainable or config.algo_class, param_space=config,
                           tune_config=tune.TuneConfig(
                               num_samples=args.num_samples, scheduler=scheduler,
                               max_concurrent_trials=args.max_concurrent_trials),
                           run_config=tune.RunConfig(stop=stop, verbose=args.verbose,
                                                     callbacks=tune_callbacks,
                                                     checkpoint_config=checkpoint,
                                                     progress_reporter=progress_reporter))
        results = tuner.fit()
        if args.as_test:
            (metric, goal), = success_metric.items()
            best = max((_value(r.metrics or {}, metric) or -math.inf) for r in results)
            if best < goal:
                raise ValueError(f"`{metric}` of {goal} not reached: best {best}")
        return results
    finally:
        if started and not keep_ray_up:
            nbdist.shutdown()


def _summary(result: dict[str, Any]) -> str:
    runners = result.get("env_runners", {})
    return (f"iteration {result.get('training_iteration')}: return "
            f"{runners.get('episode_return_mean', math.nan):.1f}, "
            f"{result.get(STEPS, 0)} env steps, {result.get('time_this_iter_s', 0):.1f} s")


__all__ = ["add_rllib_example_script_args", "run_rllib_example_script_experiment"]

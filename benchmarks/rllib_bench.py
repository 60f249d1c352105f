"""nbdist.rllib against RLlib 2.60: the same PPO program on CartPole-v1, in one sitting.

    .venv/bin/python benchmarks/rllib_bench.py [--engines nbdist,ray] [--target 450]
        [--max-iters 150] [--json FILE]

Each engine runs in a fresh interpreter: ``init(num_cpus=3)`` first (not timed; two env runners
of 1 CPU each and the driver), then

    build      seconds of ``config.build_algo()`` (env runners started, module built)
    to_target  seconds of ``train()`` calls until the return reaches ``--target``, and the
               iterations and env steps that took. ``--criterion greedy`` (the default): the
               greedy policy's mean return over 10 evaluation episodes, evaluated by
               ``train()`` every 5 iterations (``evaluation_interval=5``, in the driver, no
               exploration), the time counting the evaluations. ``--criterion train``:
               ``env_runners/episode_return_mean``; the two libraries do not average it over
               the same episodes (nbdist: the last 100 finished; RLlib 2.60's moves much faster,
               see docs/benchmarks.md), so this one does not compare like with like
    steps_s    env steps sampled per second over those train() calls (sampling and learning)

``--multi-agent N``: the same PPO on RLlib's ``MultiAgentCartPole`` with N agents and one
policy per agent (``p0`` .. ``pN-1``, agent i -> ``pi``); the target is then reached when every
policy's mean return (``module_episode_returns_mean``, of the greedy evaluation or of
training per ``--criterion``) is at least ``--target``.

The program is the same text for both (``import nbdist as ray`` and nbdist's PPOConfig, or
Ray's own): PPO with 2 env runners, 1 env each, train_batch_size 1000, minibatch 128, 8 epochs,
lr 1e-3, lambda 0.95, vf_loss_coeff 0.5, a [64] tanh MLP, seed 0; torch in the driver (RLlib:
its local learner, num_learners=0).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

ENGINES = ("nbdist", "ray")


def child(engine: str, target: float, max_iters: int, criterion: str,
          agents: int = 0) -> None:
    if engine == "nbdist":
        import nbdist as ray
        from nbdist.rllib.algorithms.ppo import PPOConfig
        from nbdist.rllib.examples.envs.classes.multi_agent import MultiAgentCartPole
    else:
        import ray
        from ray.rllib.algorithms.ppo import PPOConfig
        from ray.rllib.examples.envs.classes.multi_agent import MultiAgentCartPole
    for attempt in range(3):  # Ray's raylet misses its start deadline on a loaded machine
        try:
            ray.init(num_cpus=3)
            break
        except Exception:
            ray.shutdown()
            if attempt == 2:
                raise
    try:
        config = (PPOConfig().environment("CartPole-v1")
                  .env_runners(num_env_runners=2, num_envs_per_env_runner=1)
                  .training(lr=1e-3, num_epochs=8, train_batch_size=1000, minibatch_size=128,
                            lambda_=0.95, vf_loss_coeff=0.5)
                  .rl_module(model_config=_model_config(engine))
                  .debugging(seed=0))
        if agents:
            config.environment(MultiAgentCartPole, env_config={"num_agents": agents})
            config.multi_agent(policies={f"p{i}" for i in range(agents)},
                               policy_mapping_fn=lambda aid, *a, **kw: f"p{aid}")
        if criterion == "greedy":
            config.evaluation(evaluation_interval=5, evaluation_duration=10,
                              evaluation_duration_unit="episodes", evaluation_num_env_runners=0,
                              evaluation_config={"explore": False})
        start = time.perf_counter()
        algo = config.build_algo()
        build = time.perf_counter() - start
        start = time.perf_counter()
        curve: list[float] = []
        greedy: list[float] = []
        reached = None
        result: dict[str, Any] = {}
        for _ in range(max_iters):
            result = algo.train()
            ret = _return(result["env_runners"], agents)
            curve.append(round(float(ret), 1))
            if criterion == "greedy":
                evaluation = result.get("evaluation") or {}
                ret = _return(evaluation.get("env_runners") or {}, agents)
                if len(curve) % 5 == 0:  # RLlib repeats the last evaluation in between
                    greedy.append(round(float(ret), 1))
            if ret >= target:
                reached = time.perf_counter() - start
                break
        took = time.perf_counter() - start
        steps = int(result["env_runners"]["num_env_steps_sampled_lifetime"])
        algo.stop()
        print("RESULT " + json.dumps({
            "build": build, "to_target": reached, "iterations": len(curve), "env_steps": steps,
            "steps_s": steps / took, "curve": curve, "greedy": greedy}))
    finally:
        ray.shutdown()


def _return(runners: dict[str, Any], agents: int) -> float:
    """The mean return; with agents, the lowest of the policies' mean returns."""
    if not agents:
        return float(runners.get("episode_return_mean", float("nan")))
    per = runners.get("module_episode_returns_mean") or {}
    if len(per) < agents:
        return float("nan")
    return float(min(per.values()))


def _model_config(engine: str) -> Any:
    values = {"fcnet_hiddens": [64], "fcnet_activation": "tanh"}
    if engine == "ray":
        from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

        return DefaultModelConfig(**values)
    return values


def run_one(engine: str, target: float, max_iters: int, criterion: str,
            agents: int = 0) -> dict[str, Any] | None:
    proc = subprocess.run([sys.executable, __file__, "--child", engine, "--target",
                           str(target), "--max-iters", str(max_iters), "--criterion", criterion,
                           "--multi-agent", str(agents)],
                          capture_output=True, text=True, timeout=1800)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])  # type: ignore[no-any-return]
    sys.stderr.write(f"{engine} failed:\n{proc.stderr[-4000:]}\n")
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--target", type=float, default=450.0)
    parser.add_argument("--max-iters", type=int, default=150)
    parser.add_argument("--criterion", choices=["greedy", "train"], default="greedy")
    parser.add_argument("--multi-agent", type=int, default=0,
                        help="agents (and policies) on MultiAgentCartPole; 0: CartPole-v1")
    parser.add_argument("--json", default=None)
    parser.add_argument("--child", default=None)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.target, args.max_iters, args.criterion, args.multi_agent)
        return
    results = {}
    for engine in args.engines.split(","):
        load = os.getloadavg()[0]
        results[engine] = run_one(engine, args.target, args.max_iters, args.criterion,
                                  args.multi_agent)
        if results[engine] is not None:
            results[engine]["load_before"] = load  # type: ignore[index]
        print(engine, json.dumps(results[engine]), flush=True)
    print(f"\n| engine | build_algo() | time to {args.target:g} | iterations | env steps | "
          "env steps/s | load (1 min) before |")
    print("|---|---|---|---|---|---|---|")
    for engine, r in results.items():
        if r is None:
            print(f"| {engine} | failed | | | | | |")
            continue
        reached = "not reached" if r["to_target"] is None else f"{r['to_target']:.1f} s"
        print(f"| {engine} | {r['build']:.2f} s | {reached} | {r['iterations']} | "
              f"{r['env_steps']:,} | {r['steps_s']:.0f} | {r['load_before']:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()

"""Evolution strategies (Salimans et al. 2017), the algorithm the course writes by hand and
RLlib dropped: rollouts as nbdist tasks, the update in the driver.

Each ``train()``::

    driver                                                  tasks (num_rollout_tasks)
      theta (the policy's flat parameters) ── put once ──> for each seed of its share:
      seeds: one per perturbation pair                      eps = N(0, I) from the seed
                                                            return at theta + sigma eps
                                                            return at theta - sigma eps
                                       <── returns, lengths, steps
      eps regenerated from the seeds (nothing but seeds and returns crosses the wire);
      g = es_gradient (centered ranks of all returns, antithetic pairs);
      theta <- Adam(theta, g - l2_coeff theta, stepsize)

Episodes run greedily with the policy (`ESRLModule`): ES explores in parameter space. A task
builds its env runner once per worker process and run (``_RUNNERS``) and reuses it. The
episodes' returns and steps go into the ``env_runners`` results (``record_episodes``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import nbdist
from nbdist.rllib.algorithms.algorithm import Algorithm
from nbdist.rllib.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from nbdist.rllib.algorithms.es.es_rl_module import ESRLModule
from nbdist.rllib.algorithms.es.es_utils import Adam, es_gradient
from nbdist.rllib.core import DEFAULT_MODULE_ID
from nbdist.rllib.core.rl_module.rl_module import RLModuleSpec
from nbdist.rllib.env.env_runner_group import WAIT_S


class ESConfig(AlgorithmConfig):
    def __init__(self, algo_class: type | None = None) -> None:
        super().__init__(algo_class=algo_class or ES)
        self.num_env_runners = 0  # rollouts run as tasks, not on env-runner actors
        self.noise_stdev = 0.02
        self.stepsize = 0.01
        self.l2_coeff = 0.005
        self.episodes_per_batch = 100
        self.num_rollout_tasks = 2
        self.model_config = {"fcnet_hiddens": [32, 32], "fcnet_activation": "tanh"}

    def training(self, *, noise_stdev: Any = NotProvided, stepsize: Any = NotProvided,
                 l2_coeff: Any = NotProvided, episodes_per_batch: Any = NotProvided,
                 num_rollout_tasks: Any = NotProvided, **kwargs: Any) -> AlgorithmConfig:
        self._set(noise_stdev=noise_stdev, stepsize=stepsize, l2_coeff=l2_coeff,
                  episodes_per_batch=episodes_per_batch, num_rollout_tasks=num_rollout_tasks)
        return super().training(**kwargs)

    def get_default_rl_module_spec(self) -> Any:
        return RLModuleSpec(module_class=ESRLModule)

    def validate(self) -> None:
        super().validate()
        if int(self.episodes_per_batch) < 2:
            raise ValueError("episodes_per_batch must be at least 2 (one antithetic pair)")
        if float(self.noise_stdev) <= 0:
            raise ValueError(f"noise_stdev must be positive, not {self.noise_stdev}")


EsConfig = ESConfig


def noise(seed: int, size: int) -> np.ndarray:
    """The perturbation ``seed`` stands for (the same in a task and in the driver)."""
    return np.random.default_rng(seed).standard_normal(size).astype(np.float32)


# One env runner per worker process and run, built by the run's first task there.
_RUNNERS: dict[str, Any] = {}


def es_rollouts(run: str, runner_kwargs: dict[str, Any], theta: np.ndarray,
                seeds: list[int], sigma: float) -> dict[str, Any]:
    """A rollout task: the returns at theta +/- sigma eps for each seed (see the docstring)."""
    from nbdist.rllib.env.env_runner import SingleAgentEnvRunner

    runner = _RUNNERS.get(run)
    if runner is None:
        _RUNNERS.clear()
        runner = _RUNNERS[run] = SingleAgentEnvRunner(**runner_kwargs)
    module: Any = runner.module
    returns = np.zeros((len(seeds), 2))
    lens: list[int] = []
    steps = 0
    for i, seed in enumerate(seeds):
        eps = noise(seed, len(theta))
        for j, sign in enumerate((1.0, -1.0)):
            module.set_flat_parameters(theta + sign * sigma * eps)
            result = runner.sample(num_episodes=1, explore=False)
            returns[i, j] = result["episode_returns"][0]
            lens += result["episode_lens"]
            steps += result["num_env_steps"]
    return {"returns": returns, "lens": lens, "num_env_steps": steps}


class ES(Algorithm):
    @classmethod
    def get_default_config(cls) -> AlgorithmConfig:
        return ESConfig()

    def setup(self, config: Any) -> None:
        super().setup(config)
        self.theta = self.module.flat_parameters()
        self.optimizer = Adam(len(self.theta), lr=float(self.config.stepsize))
        self.rng = np.random.default_rng(self.config.seed)
        self._rollouts = nbdist.remote(es_rollouts)

    def training_step(self) -> dict[str, Any]:
        config = self.config
        pairs = -(-int(config.episodes_per_batch) // 2)
        seeds = [int(s) for s in self.rng.integers(0, 2**31 - 1, size=pairs)]
        tasks = max(1, min(int(config.num_rollout_tasks), pairs))
        runner_kwargs = {"env_creator": self.env_creator, "env_name": self.env_name,
                         "env_config": self.env_config, "num_envs": 1,
                         "module_spec": self.module_spec, "seed": None,
                         "clip_actions": True}
        sigma = float(config.noise_stdev)
        theta_ref = nbdist.put(self.theta)
        refs = [self._rollouts.options(
                    num_cpus=1, library_call=("rllib", self.run_name, f"rollouts {i}",
                                              "work")).remote(
                    self.run_name, {**runner_kwargs, "worker_index": i + 1}, theta_ref,
                    seeds[i::tasks], sigma)
                for i in range(tasks)]
        try:
            # In short steps (WAIT_S): a notebook shows the run's view, not a progress bar.
            while nbdist.wait(refs, num_returns=len(refs), timeout=WAIT_S)[1]:
                pass
            results = nbdist.get(refs)
        except KeyboardInterrupt:  # an interrupted cell leaves no rollout running
            for ref in refs:
                nbdist.cancel(ref, force=True)
            raise
        returns = np.zeros((pairs, 2))
        for i, result in enumerate(results):
            returns[i::tasks] = result["returns"]
            self.record_episodes(list(result["returns"].ravel()), result["lens"],
                                 result["num_env_steps"])
        noises = np.stack([noise(seed, len(self.theta)) for seed in seeds])
        gradient = es_gradient(noises, returns[:, 0], returns[:, 1], sigma)
        previous = self.theta
        self.theta = self.optimizer.step(self.theta,
                                         gradient - float(config.l2_coeff) * self.theta)
        self.module.set_flat_parameters(self.theta)
        self.sync_weights()
        return {DEFAULT_MODULE_ID: {
            "grad_norm": float(np.linalg.norm(gradient)),
            "weights_norm": float(np.linalg.norm(self.theta)),
            "update_ratio": float(np.linalg.norm(self.theta - previous))
                            / max(float(np.linalg.norm(previous)), 1e-12),
            "episode_return_perturbed_mean": float(returns.mean()),
            "num_perturbations": float(pairs)},
            "num_env_steps_trained": sum(r["num_env_steps"] for r in results)}

    def get_state(self) -> dict[str, Any]:
        optimizer = self.optimizer
        return {**super().get_state(), "theta": self.theta.copy(),
                "adam": {"m": optimizer.m.copy(), "v": optimizer.v.copy(), "t": optimizer.t},
                "rng": self.rng.bit_generator.state}

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        self.theta = state["theta"].copy()
        adam = state["adam"]
        self.optimizer.m, self.optimizer.v = adam["m"].copy(), adam["v"].copy()
        self.optimizer.t = int(adam["t"])
        self.rng.bit_generator.state = state["rng"]

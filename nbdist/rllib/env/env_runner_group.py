"""``EnvRunnerGroup``: an algorithm's env runners, as actors in one placement group.

    driver (Algorithm)                          placement group: one bundle per runner
      sync_weights(state) -> nbdist.put(state) ──ref──> runner 1 ... runner N (actors)
      sample(n)           -> runner.sample.remote(ref, num_timesteps=n/N) ...
                          <- episodes + metrics (finished episodes' returns and lengths)

A ``MultiAgentEnv`` (a module per policy) gets ``MultiAgentEnvRunner``s instead of
``SingleAgentEnvRunner``s. ``num_env_runners=0``: one runner lives in the driver (no actor, no placement group). The
module's weights are put in the object store once per change and the same reference goes to
every runner. A runner whose actor died (its process killed, its node lost) is replaced by a new
actor in the same bundle, given the current weights, and asked again: the iteration goes on
(``restart_failed_env_runners``, up to ``max_num_env_runner_restarts``). An error raised by the
env itself is not a death: it reaches the caller with the env's traceback.

Each runner's calls carry nbdist's library mark (``library_call=("rllib", <algorithm>,
"env_runner N", role)``): its ``sample`` calls are the runner's work, the rest is plumbing the
views fold away.
"""

from __future__ import annotations

import time
from typing import Any

import nbdist
from nbdist.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
from nbdist.rllib.env.env_runner import SingleAgentEnvRunner
from nbdist.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner

# The driver waits on its runners in steps this short, so that a notebook shows the run's view
# rather than a progress bar per iteration (a bar opens for a get or wait still blocked after a
# second; on a loaded machine one may still open now and then).
WAIT_S = 0.5


def _gather(refs: list[Any]) -> list[Any]:
    """``nbdist.get(refs)``, waited for in short steps (see WAIT_S)."""
    while refs:
        _, pending = nbdist.wait(refs, num_returns=len(refs), timeout=WAIT_S)
        if not pending:
            break
    return nbdist.get(refs) if refs else []


class EnvRunnerGroup:
    def __init__(self, *, config: Any, env_creator: Any, env_name: str, module_spec: Any,
                 run_name: str, num_env_runners: int | None = None,
                 module_state: dict[str, Any] | None = None, on_restart: Any = None,
                 local: bool | None = None, wait_ready: bool = True) -> None:
        self.config = config
        self.run_name = run_name
        self.num_env_runners = int(config.num_env_runners if num_env_runners is None
                                   else num_env_runners)
        self._on_restart = on_restart
        self._kwargs = {"env_creator": env_creator, "env_name": env_name,
                        "env_config": dict(config.env_config or {}),
                        "num_envs": int(config.num_envs_per_env_runner),
                        "module_spec": module_spec, "num_workers": self.num_env_runners,
                        "seed": config.seed,
                        "clip_actions": bool(config.clip_actions or config.normalize_actions)}
        self.runner_class: Any = SingleAgentEnvRunner
        if isinstance(module_spec, MultiRLModuleSpec):  # a MultiAgentEnv, a module per policy
            self.runner_class = MultiAgentEnvRunner
            self._kwargs["policy_mapping_fn"] = config.policy_mapping_fn
        self.num_restarts = 0
        self._state_ref: Any = None
        self._state: dict[str, Any] | None = module_state
        self.local_env_runner: SingleAgentEnvRunner | None = None
        self.actors: list[Any] = []
        self.placement_group: Any = None
        self._starting: list[Any] = []  # the runners' first calls, until wait_ready()
        if self.num_env_runners == 0 or local:
            self.local_env_runner = self.runner_class(worker_index=0,
                                                      module_state=module_state,
                                                      **self._kwargs)
        if self.num_env_runners > 0:
            self._start_actors()
            if wait_ready:
                self.wait_ready()

    def wait_ready(self) -> None:
        """Wait until every runner has started (built its envs and module); an env that
        cannot be built raises here."""
        starting, self._starting = self._starting, []
        _gather(starting)

    # --- actors ---------------------------------------------------------------------------
    def _mark(self, index: int, role: str = "control") -> tuple[str, str, str, str]:
        return ("rllib", self.run_name, f"env_runner {index}", role)

    def _start_actors(self) -> None:
        from nbdist.util.placement_group import placement_group

        cpus = float(self.config.num_cpus_per_env_runner)
        bundles = [{"CPU": cpus} for _ in range(self.num_env_runners)]
        with nbdist.events.library_call("rllib", self.run_name):
            self.placement_group = placement_group(bundles, strategy="PACK")
            timeout = self.config.sample_timeout_s or 60.0
            if not self.placement_group.wait(max(30.0, float(timeout))):
                self.stop()
                raise RuntimeError(
                    f"the {self.num_env_runners} env runners of {self.run_name} need "
                    f"{self.num_env_runners} x {cpus} CPU, which the cluster cannot place "
                    f"({nbdist.available_resources().get('CPU', 0)} CPU free): lower "
                    "num_env_runners or num_cpus_per_env_runner")
        self.actors = [self._make_actor(i) for i in range(1, self.num_env_runners + 1)]
        self._starting = [a.ping.options(library_call=self._mark(i + 1)).remote()
                          for i, a in enumerate(self.actors)]

    def _make_actor(self, index: int) -> Any:
        from nbdist.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        cls = nbdist.remote(self.runner_class)
        strategy = PlacementGroupSchedulingStrategy(self.placement_group,
                                                    placement_group_bundle_index=index - 1)
        return cls.options(num_cpus=float(self.config.num_cpus_per_env_runner),
                           scheduling_strategy=strategy, max_concurrency=1,
                           name=None, library_call=self._mark(index)).remote(
            worker_index=index, module_state=self._state, **self._kwargs)

    def _replace(self, index: int, error: BaseException) -> Any:
        if not self.config.restart_failed_env_runners or \
                self.num_restarts >= int(self.config.max_num_env_runner_restarts):
            raise error
        self.num_restarts += 1
        try:
            nbdist.kill(self.actors[index - 1])
        except Exception:
            pass
        self.actors[index - 1] = self._make_actor(index)
        if self._on_restart is not None:
            self._on_restart(index, error)
        return self.actors[index - 1]

    def replace_env_runner(self, index: int, error: BaseException) -> Any:
        """The new actor of runner ``index`` (1..N), whose call failed with ``error`` (its
        death), for an algorithm that calls runners one by one (A3C); re-raises ``error`` when
        restarts are off or used up."""
        return self._replace(index, error)

    # --- weights and sampling -------------------------------------------------------------
    def sync_weights(self, state: dict[str, Any]) -> None:
        """Send the module's state to every runner (put once; each runner gets the ref with
        its next ``sample``)."""
        self._state = state
        self._state_ref = None
        if self.local_env_runner is not None:
            self.local_env_runner.set_state(state)
        if self.actors:
            with nbdist.events.library_call("rllib", self.run_name):
                self._state_ref = nbdist.put(state)

    def sample(self, *, num_timesteps: int | None = None, num_episodes: int | None = None,
               explore: bool = True, random_actions: bool = False) -> list[dict[str, Any]]:
        """Sample from every runner (the local one if there are no actors); one result dict
        per runner (see ``SingleAgentEnvRunner.sample``)."""
        kwargs: dict[str, Any] = {"explore": explore, "random_actions": random_actions}
        if not self.actors:
            assert self.local_env_runner is not None
            return [self.local_env_runner.sample(num_timesteps=num_timesteps,
                                                 num_episodes=num_episodes, **kwargs)]
        with nbdist.events.library_call("rllib", self.run_name):
            return self._sample_actors(num_timesteps, num_episodes, kwargs)

    def _sample_actors(self, num_timesteps: int | None, num_episodes: int | None,
                       kwargs: dict[str, Any]) -> list[dict[str, Any]]:
        n = len(self.actors)
        per = {"num_timesteps": None if num_timesteps is None else -(-int(num_timesteps) // n),
               "num_episodes": None if num_episodes is None else -(-int(num_episodes) // n)}
        pending = {self._submit(i, per, kwargs): i for i in range(1, n + 1)}
        results: dict[int, dict[str, Any]] = {}
        timeout = self.config.sample_timeout_s
        deadline = None if not timeout else time.monotonic() + float(timeout)
        while pending:
            ready, _ = nbdist.wait(list(pending), num_returns=1, timeout=WAIT_S)
            for ref in ready:
                i = pending.pop(ref)
                try:
                    results[i] = nbdist.get(ref)
                except (nbdist.exceptions.ActorError, nbdist.exceptions.WorkerCrashedError,
                        nbdist.exceptions.ObjectLostError) as error:
                    self._replace(i, error)
                    pending[self._submit(i, per, kwargs)] = i
            if pending and deadline is not None and time.monotonic() > deadline:
                raise nbdist.exceptions.GetTimeoutError(
                    f"env runners {sorted(pending.values())} of {self.run_name} did not "
                    f"return their samples within sample_timeout_s={timeout}")
        return [results[i] for i in sorted(results)]

    def _submit(self, index: int, per: dict[str, Any], kwargs: dict[str, Any]) -> Any:
        state = self._state_ref if self._state_ref is not None else self._state
        actor = self.actors[index - 1]
        return actor.sample.options(library_call=self._mark(index, "work")).remote(
            state, **per, **kwargs)

    def foreach_env_runner(self, fn: Any, local_env_runner: bool = True) -> list[Any]:
        """``fn(runner)`` on every runner (the driver's too, first, if there is one)."""
        out = [fn(self.local_env_runner)] if local_env_runner and \
            self.local_env_runner is not None else []

        refs = [a.apply.options(library_call=self._mark(i + 1)).remote(fn)
                for i, a in enumerate(self.actors)]
        return out + _gather(refs)

    def num_healthy_remote_workers(self) -> int:
        return len(self.actors)

    def healthy_env_runner_ids(self) -> list[int]:
        return list(range(1, len(self.actors) + 1))

    def stop(self) -> None:
        from nbdist.util.placement_group import remove_placement_group

        for actor in self.actors:
            try:
                nbdist.kill(actor)
            except Exception:
                pass
        self.actors = []
        if self.local_env_runner is not None:
            self.local_env_runner.stop()
        if self.placement_group is not None:
            try:
                remove_placement_group(self.placement_group)
            except Exception:
                pass
            self.placement_group = None


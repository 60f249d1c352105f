"""``LearnerGroup``: an algorithm's learners, one ``Learner`` per module it trains, in the
driver or in learner actors (``.learners(num_learners=N)``).

``update({module_id: batch}, minibatch_size=, num_epochs=)`` runs each module's update and
returns ``{module_id: stats}`` (RLlib's ``learners/<module_id>/...``). A module whose id is not
in the dict (a policy no agent was mapped to, or one not in ``policies_to_train``) is not
touched.

- ``num_learners=0``: the learners run in the driver on the algorithm's own modules.
- ``num_learners=N``: N learner actors (``num_cpus_per_learner`` CPUs each; "auto" is 1), each
  with its own copy of the modules and optimizers. The update is data-parallel::

      driver                                        learner 1 .. N (actors)
        put(batches) once ──ref──────────────────▶ load
        per minibatch: its rows split in N shards ─▶ step: apply the last averaged gradients,
                                                    compute the gradients of its shard
        ◀── gradients, stats, shard size ──────────
        gradients averaged (weighted by shard size: the gradient of the whole minibatch's
        mean loss), sent with the next step
        finish ───────────────────────────────────▶ apply the last; after_gradient_based_update
                                                    with the averaged stats (PPO's KL coeff)
        the new weights from learner 1 into the driver's modules (for the env runners)

  Every learner applies the same averaged gradients to the same weights, so the copies stay
  equal; the result is the driver's update computed in N pieces. Each call is marked
  ``library_call=("rllib", <algorithm>, "learner N", role)``.
"""

from __future__ import annotations

from typing import Any

import nbdist
from nbdist.rllib.core import DEFAULT_MODULE_ID
from nbdist.rllib.core.rl_module.multi_rl_module import MultiRLModule


def module_ids(module: Any) -> list[str]:
    return list(module.keys()) if isinstance(module, MultiRLModule) else [DEFAULT_MODULE_ID]


def sub_module(module: Any, module_id: str) -> Any:
    return module[module_id] if isinstance(module, MultiRLModule) else module


def _learners(config: Any, module: Any, learner_class: type) -> dict[str, Any]:
    return {mid: learner_class(config=config, module=sub_module(module, mid), module_id=mid)
            for mid in module_ids(module)}


class LearnerWorker:
    """A learner actor: its own copy of the modules and one learner per module."""

    def __init__(self, *, config: Any, module_spec: Any, learner_class: type,
                 module_state: dict[str, Any]) -> None:
        import torch

        torch.set_num_threads(1)
        self.module = module_spec.build()
        self.module.set_state(module_state)
        self.module.eval()
        self.learners = _learners(config, self.module, learner_class)
        self.batches: dict[str, Any] = {}

    def ping(self) -> int:
        import os

        return os.getpid()

    def load(self, batches: dict[str, Any]) -> None:
        self.batches = batches

    def step(self, module_id: str, rows: Any, apply: Any) -> tuple[Any, dict[str, float], int]:
        import torch

        learner = self.learners[module_id]
        if apply is not None:
            learner.apply_gradients(apply)
        if rows is None or not len(rows):
            return None, {}, 0
        index = torch.as_tensor(rows)
        minibatch = {k: v[index] for k, v in self.batches[module_id].items()}
        grads, stats = learner.compute_gradients(minibatch)
        return grads, stats, len(rows)

    def finish(self, module_id: str, apply: Any, stats: dict[str, float]) -> dict[str, float]:
        learner = self.learners[module_id]
        if apply is not None:
            learner.apply_gradients(apply)
        learner.num_updates += 1
        return learner.after_gradient_based_update(dict(stats))

    def get_weights(self) -> dict[str, Any]:
        return self.module.get_state()

    def get_state(self) -> dict[str, Any]:
        return {mid: learner.get_state() for mid, learner in self.learners.items()}

    def set_state(self, state: dict[str, Any], weights: dict[str, Any]) -> None:
        self.module.set_state(weights)
        for mid, learner_state in state.items():
            if mid in self.learners:
                self.learners[mid].set_state(learner_state)


def _gather(refs: list[Any]) -> list[Any]:
    """``nbdist.get(refs)``, waited for in short steps (a notebook shows the run's view rather
    than a progress bar; see env_runner_group.WAIT_S)."""
    while refs:
        _, pending = nbdist.wait(refs, num_returns=len(refs), timeout=0.5)
        if not pending:
            break
    return nbdist.get(refs) if refs else []


def _average(outs: list[tuple[Any, dict[str, float], int]]) -> tuple[Any, dict[str, float]]:
    """The shards' gradients and stats averaged, weighted by their sizes."""
    outs = [o for o in outs if o[2]]
    total = float(sum(n for _g, _s, n in outs))
    grads: list[Any] = []
    for parts in zip(*(g for g, _s, _n in outs), strict=True):
        present = [(p, n) for p, (_g, _s, n) in zip(parts, outs, strict=True)
                   if p is not None]
        grads.append(None if not present else
                     sum(p * (n / total) for p, n in present))
    stats: dict[str, float] = {}
    for _g, s, n in outs:
        for key, value in s.items():
            stats[key] = stats.get(key, 0.0) + float(value) * n / total
    return grads, stats


class LearnerGroup:
    def __init__(self, *, config: Any, module: Any, learner_class: type,
                 module_spec: Any = None, run_name: str = "",
                 num_learners: int | None = None) -> None:
        self.config = config
        self.module = module
        self.learner_class = learner_class
        self.run_name = run_name
        self.num_learners = int(config.num_learners if num_learners is None else num_learners)
        self.actors: list[Any] = []
        self._learners: dict[str, Any] = {}
        if self.num_learners == 0 or module_spec is None:
            self.num_learners = 0
            self._learners = _learners(config, module, learner_class)
        else:
            self._start(module_spec)

    # --- the actors -----------------------------------------------------------------------
    def _mark(self, index: int, role: str = "control") -> tuple[str, str, str, str]:
        return ("rllib", self.run_name, f"learner {index}", role)

    def _start(self, module_spec: Any) -> None:
        cpus = self.config.num_cpus_per_learner
        cpus = 1.0 if cpus in (None, "auto") else float(cpus)
        free = float(nbdist.available_resources().get("CPU", 0.0))
        if cpus * self.num_learners > free + 1e-9:
            raise RuntimeError(
                f"the {self.num_learners} learner actors of {self.run_name} need "
                f"{self.num_learners} x {cpus:g} CPU and the cluster has {free:g} CPU free "
                "(beside the env runners): lower num_learners, or set num_cpus_per_learner "
                "(0 shares the CPUs)")
        cls = nbdist.remote(LearnerWorker)
        state = self.module.get_state()
        with nbdist.events.library_call("rllib", self.run_name):
            state_ref = nbdist.put(state)
            self.actors = [
                cls.options(num_cpus=cpus, max_concurrency=1,
                            library_call=self._mark(i)).remote(
                    config=self.config, module_spec=module_spec,
                    learner_class=self.learner_class, module_state=state_ref)
                for i in range(1, self.num_learners + 1)]

    def foreach_learner(self, method: str, *args: Any, role: str = "control") -> list[Any]:
        """``method(*args)`` on every learner actor, their results in order."""
        refs = [getattr(a, method).options(library_call=self._mark(i, role)).remote(*args)
                for i, a in enumerate(self.actors, start=1)]
        return _gather(refs)

    @property
    def is_local(self) -> bool:
        return not self.actors

    def __getitem__(self, module_id: str) -> Any:
        """The driver's learner of ``module_id`` (``num_learners=0``)."""
        if not self._learners:
            raise KeyError(f"the learners of {module_id!r} are actors "
                           f"(num_learners={self.num_learners})")
        return self._learners[module_id]

    def keys(self) -> list[str]:
        return module_ids(self.module)

    # --- the update -----------------------------------------------------------------------
    def update(self, batches: dict[str, Any], *, minibatch_size: int | None = None,
               num_epochs: int = 1, shuffle: bool = True) -> dict[str, dict[str, float]]:
        if not self.actors:
            return {mid: self._learners[mid].update(batch, minibatch_size=minibatch_size,
                                                    num_epochs=num_epochs, shuffle=shuffle)
                    for mid, batch in batches.items()}
        if not batches:
            return {}
        with nbdist.events.library_call("rllib", self.run_name):
            self.foreach_learner("load", nbdist.put(batches))
            results = {mid: self._update_module(mid, batch, minibatch_size, num_epochs,
                                                shuffle)
                       for mid, batch in batches.items()}
            self.module.set_state(self.foreach_learner("get_weights")[0])
        return results

    def _update_module(self, mid: str, batch: dict[str, Any], minibatch_size: int | None,
                       num_epochs: int, shuffle: bool) -> dict[str, float]:
        import torch

        size = len(next(iter(batch.values())))
        minibatch = int(minibatch_size or size)
        n = len(self.actors)
        apply: Any = None
        sums: dict[str, float] = {}
        count = 0
        for _ in range(max(1, int(num_epochs))):
            order = torch.randperm(size) if shuffle else torch.arange(size)
            for start in range(0, size, minibatch):
                rows = order[start:start + minibatch].numpy()
                shards = [rows[j::n] for j in range(n)]
                refs = [a.step.options(library_call=self._mark(j + 1, "work")).remote(
                            mid, shards[j], apply) for j, a in enumerate(self.actors)]
                apply, stats = _average(_gather(refs))
                for key, value in stats.items():
                    sums[key] = sums.get(key, 0.0) + value
                count += 1
        mean = {k: v / max(1, count) for k, v in sums.items()}
        stats = self.foreach_learner("finish", mid, apply, mean, role="work")[0]
        stats["num_module_steps_trained"] = float(size * max(1, int(num_epochs)))
        stats["num_minibatch_updates"] = float(count)
        return stats

    # --- state ----------------------------------------------------------------------------
    def get_weights(self) -> dict[str, Any]:
        return self.module.get_state()

    def get_state(self) -> dict[str, Any]:
        if self.actors:
            return self.foreach_learner("get_state")[0]
        return {mid: learner.get_state() for mid, learner in self._learners.items()}

    def set_state(self, state: dict[str, Any]) -> None:
        """The learners' state (optimizers, ...); learner actors also take the driver's
        module weights (set them first)."""
        if self.actors:
            self.foreach_learner("set_state", state, self.module.get_state())
            return
        for mid, learner_state in state.items():
            if mid in self._learners:
                self._learners[mid].set_state(learner_state)

    def stop(self) -> None:
        for actor in self.actors:
            try:
                nbdist.kill(actor)
            except Exception:
                pass
        self.actors = []

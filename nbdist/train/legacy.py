"""The seed's trainer: ``Trainer(backend="torch" | "tensorflow", num_workers, use_gpu,
resources_per_worker)`` with ``start()``, ``run(train_func, config=None)`` and ``shutdown()``
(Ray Train 1.x), also usable as a context manager.

``start`` brings the group up once (framework set up, as for ``fit``); every ``run`` then
calls a function on all workers and returns their return values in rank order. If a worker
fails, the whole group is killed (its peers may be blocked waiting for it) and ``run`` raises
TrainingFailedError; ``start()`` brings up a new group.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from nbdist import events

from .backend import BackendConfig
from .config import RunConfig, ScalingConfig
from .context import SessionStart
from .controller import default_run_name, gather
from .errors import WorkerGroupError, describe_failure
from .worker_group import WorkerGroup

_F = TypeVar("_F", bound=Callable[..., Any])


def _train_calls(method: _F) -> _F:
    """Mark the calls and waits the method makes as Train's own (`nbdist.events.marks`)."""
    @functools.wraps(method)
    def marked(self: Trainer, *args: Any, **kwargs: Any) -> Any:
        with events.library_call("train", self._name):
            return method(self, *args, **kwargs)
    return marked  # type: ignore[return-value]


def _backend(backend: str | BackendConfig) -> BackendConfig:
    if isinstance(backend, BackendConfig):
        return backend
    if backend == "torch":
        from .torch import TorchConfig

        return TorchConfig()
    if backend == "tensorflow":
        from .tensorflow import TensorflowConfig

        return TensorflowConfig()
    raise ValueError(f"Trainer(backend={backend!r}): use 'torch', 'tensorflow' or a "
                     "BackendConfig.")


class Trainer:
    """A group of ``num_workers`` workers that runs training functions on demand."""

    def __init__(self, backend: str | BackendConfig, num_workers: int = 1,
                 use_gpu: bool = False, resources_per_worker: dict[str, float] | None = None,
                 logdir: str | None = None) -> None:
        self._backend = _backend(backend)
        self._scaling = ScalingConfig(num_workers=num_workers, use_gpu=use_gpu,
                                      resources_per_worker=resources_per_worker)
        self._storage = RunConfig(storage_path=logdir).resolved_storage_path()
        self._name = default_run_name()
        self._group: WorkerGroup | None = None
        self._contexts: list[Any] = []
        self._runs = 0

    @_train_calls
    def start(self) -> None:
        """Start the workers and set up the framework on them."""
        import nbdist

        if self._group is not None:
            raise RuntimeError("This Trainer is already started; call shutdown() first.")
        if not nbdist.is_initialized():
            nbdist.init()
        group = WorkerGroup(self._scaling.num_workers, self._scaling.worker_resources(),
                            self._scaling.placement_strategy)
        try:
            self._contexts = group.contexts(self._name, self._storage, self._scaling.use_gpu)
            self._check(group, group.setup_refs(self._contexts, self._backend))
        except BaseException:
            group.kill()
            raise
        self._group = group

    @_train_calls
    def run(self, train_func: Any, config: dict[str, Any] | None = None) -> list[Any]:
        """Run ``train_func`` (taking ``config`` if it has a parameter) on every worker;
        returns the workers' return values in rank order."""
        if self._group is None:
            raise RuntimeError("Call Trainer.start() before run().")
        if not inspect.signature(train_func).parameters and config is not None:
            raise ValueError("config was given but train_func takes no argument.")
        group = self._group
        self._runs += 1
        run_dir = f"{self._storage}/{self._name}/run_{self._runs:03d}"
        try:
            refs = [actor.run.options(library_call=("train", self._name, f"rank {rank}", "work"))
                    .remote(train_func, config,
                            SessionStart(self._contexts[rank], run_dir, 0, None), {})
                    for rank, actor in enumerate(group.actors)]
            values = self._check(group, refs)
        except BaseException:
            self._group = None
            group.kill()
            raise
        return [values[rank] for rank in range(len(group.actors))]

    @staticmethod
    def _check(group: WorkerGroup, refs: list[Any]) -> dict[int, Any]:
        values, failed = gather(refs)
        if failed:
            details = "\n\n".join(describe_failure(r, e) for r, e in sorted(failed.items()))
            raise WorkerGroupError(f"Training failed; the workers were stopped:\n{details}",
                                   failed)
        return values

    @_train_calls
    def shutdown(self) -> None:
        """End the workers (their processes are killed); the Trainer can be started again."""
        group, self._group = self._group, None
        if group is None:
            return
        try:
            gather([a.teardown.options(library_call="train").remote() for a in group.actors])
        finally:
            group.kill()

    def __enter__(self) -> Trainer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

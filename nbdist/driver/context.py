"""The runtime context (Ray's ``get_runtime_context()``): where the calling code runs.

`ContextNames` holds what every backend shares: the id objects (``job_id``, ``node_id``,
``task_id``, ``actor_id``: `nbdist.ids` types with ``.hex()``, while the ``get_*_id()`` calls
return the hex strings), ``get()`` (a dict that leaves out the task and actor ids where there
are none, as Ray's) and the names derived from the backend's answers. `EngineContext` answers
them on nbdist's engine, from the client of the calling process: in a worker, the spec of the
call running in this thread and the constructor call of the process's actor.
"""

from __future__ import annotations

import inspect
import warnings
from typing import TYPE_CHECKING, Any

from nbdist.ids import ActorID, JobID, NodeID, TaskID, hex_id

if TYPE_CHECKING:
    from nbdist.driver.runtime import CoreClient


class RayDeprecationWarning(DeprecationWarning):
    """A deprecated name of Ray's API that still works (Ray's own category of the same name)."""


_DEPRECATED = ("This API is deprecated and may be removed in future releases. You could "
               'suppress this warning by setting env variable PYTHONWARNINGS="ignore::'
               'DeprecationWarning"\n')


def _deprecated(instead: str) -> None:
    """Warn, as Ray 2.60 does, that the caller used a deprecated context name."""
    warnings.warn(_DEPRECATED + f"Use {instead} instead", RayDeprecationWarning, stacklevel=3)


def _in_worker(what: str) -> None:
    raise RuntimeError(f"{what} is only available in a task or an actor, not in the driver.")


class ContextNames:
    """Attribute forms of the ``get_*`` methods, and ``get()`` (a dict of them)."""

    def get_job_id(self) -> str:
        raise NotImplementedError

    def get_task_id(self) -> str | None:
        raise NotImplementedError

    def get_node_id(self) -> str:
        raise NotImplementedError

    def get_actor_id(self) -> str | None:
        raise NotImplementedError

    def get_worker_id(self) -> str:
        raise NotImplementedError

    def get_task_name(self) -> str | None:
        raise NotImplementedError

    def get_actor_name(self) -> str | None:
        raise NotImplementedError

    def get_task_function_name(self) -> str | None:
        """``module.function`` of the running task (``module.Class.method`` for an actor
        call), as Ray names it; None on the driver."""
        raise NotImplementedError

    def get_assigned_resources(self) -> dict[str, float]:
        raise NotImplementedError

    def get_accelerator_ids(self) -> dict[str, list[str]]:
        raise NotImplementedError

    def get_placement_group_id(self) -> str | None:
        raise NotImplementedError

    @property
    def current_actor(self) -> Any:
        raise NotImplementedError

    @property
    def was_current_actor_reconstructed(self) -> bool:
        raise NotImplementedError

    def is_canceled(self) -> bool:
        """Whether ``cancel()`` reached the running task (in a task or a sync actor)."""
        raise NotImplementedError

    @property
    def namespace(self) -> str:
        raise NotImplementedError

    @property
    def job_id(self) -> JobID:
        _deprecated("get_job_id()")
        return JobID(self.get_job_id())

    @property
    def node_id(self) -> NodeID:
        _deprecated("get_node_id()")
        return NodeID(self.get_node_id())

    @property
    def task_id(self) -> TaskID | None:
        _deprecated("get_task_id()")
        return self._task_id()

    @property
    def actor_id(self) -> ActorID | None:
        _deprecated("get_actor_id()")
        aid = self.get_actor_id()
        return None if aid is None else ActorID(aid)

    @property
    def current_placement_group_id(self) -> Any:
        from nbdist.driver.groups import PlacementGroupID

        _deprecated("get_placement_group_id()")
        return PlacementGroupID(self.get_placement_group_id() or "f" * 36)

    def get_resource_ids(self) -> dict[str, list[str]]:
        _deprecated("get_accelerator_ids()")
        return self.get_accelerator_ids()

    def _task_id(self) -> TaskID | None:
        tid = self.get_task_id()
        return None if tid is None else TaskID(tid)

    def get(self) -> dict[str, Any]:
        """job_id, node_id and namespace; task_id and actor_id where they apply (as Ray).
        Deprecated in Ray, as the id properties are: it warns as Ray's does."""
        _deprecated("get_xxx_id() methods to get relevant ids")
        out: dict[str, Any] = {"job_id": JobID(self.get_job_id()),
                               "node_id": NodeID(self.get_node_id()),
                               "namespace": self.namespace}
        task_id = self._task_id()
        if task_id is not None:
            out["task_id"] = task_id
            actor_id = self.get_actor_id()
            if actor_id is not None:
                out["actor_id"] = ActorID(actor_id)
        return out


def assigned_resources(shape: Any, extra: dict[str, Any] | None) -> dict[str, float]:
    """The resources a call holds, by their own names, from its spec's shape (placement group
    forms ``CPU_group_<pg>`` and node pins left out)."""
    group = (extra or {}).get("pg")
    suffix = f"_group_{group[0]}" if group else None
    out: dict[str, float] = {}
    for name, amount in shape or ():
        if name.startswith("node:") or name.startswith("bundle_group_"):
            continue
        if suffix is not None:
            if not name.endswith(suffix):
                continue
            name = name[:-len(suffix)]
            if "_group_" in name:  # the bundle-indexed form of the same amount
                continue
        out[name] = out.get(name, 0.0) + float(amount)
    return out


class EngineContext(ContextNames):
    """The runtime context on nbdist's engine."""

    def __init__(self, client: CoreClient, namespace: str) -> None:
        self._client = client
        self._namespace = namespace

    def _spec(self) -> tuple | None:
        return self._client.ctx.spec if self._client.ctx.task_id else None

    def _actor_spec(self) -> tuple | None:
        worker = self._client.worker
        return None if worker is None or not self._client.ctx.actor_id else worker.actor_spec

    def _actor_extra(self) -> dict[str, Any]:
        from nbdist.wire import protocol as P

        spec = self._actor_spec()
        return (spec[P.S_EXTRA] or {}) if spec is not None else {}

    def get_job_id(self) -> str:
        c = self._client
        return hex_id(c.job or c.ctx.job)

    def get_task_id(self) -> str | None:
        tid = self._client.ctx.task_id
        return hex_id(tid) if tid else None

    def get_node_id(self) -> str:
        return self._client.node_id

    def get_actor_id(self) -> str | None:
        aid = self._client.ctx.actor_id
        return hex_id(aid) if aid else None

    def get_worker_id(self) -> str:
        return hex_id(self._client.client_no)

    def get_task_name(self) -> str | None:
        return self._client.ctx.name or None if self._client.ctx.task_id else None

    def get_task_function_name(self) -> str | None:
        from nbdist.wire import protocol as P

        spec = self._spec()
        worker = self._client.worker
        if spec is None or worker is None:
            return None
        if spec[P.S_ACTOR]:
            cls = type(worker.instance)
            method = spec[P.S_METHOD]
            name = "__init__" if method == P.ACTOR_INIT else method
            bound = getattr(cls, name, None)
            if inspect.iscoroutinefunction(bound) or inspect.isasyncgenfunction(bound):
                # Ray names an async actor's method by its qualified name (the class's
                # enclosing function included), a sync one by module, class and method.
                return f"{cls.__module__}.{bound.__qualname__}"
            return f"{cls.__module__}.{cls.__name__}.{name}"
        fn = worker.fns.get(spec[P.S_FID])
        fn = getattr(fn, "__wrapped__", fn)
        if fn is None:
            return spec[P.S_NAME]
        return f"{getattr(fn, '__module__', None) or '__main__'}.{fn.__name__}"

    def get_actor_name(self) -> str | None:
        if not self._client.ctx.actor_id:
            return None
        extra = self._actor_extra()
        return extra.get("actor_name") or extra.get("name") or ""

    def get_assigned_resources(self) -> dict[str, float]:
        from nbdist.wire import protocol as P

        spec = self._spec()
        if spec is None:
            _in_worker("get_assigned_resources()")
        assert spec is not None
        if spec[P.S_ACTOR] and spec[P.S_METHOD] != P.ACTOR_INIT:
            spec = self._actor_spec() or spec  # an actor's calls use what the actor holds
        shape = spec[P.S_RESOURCES]
        if shape is None:  # a task's default
            shape = (("CPU", 1.0),)
        return assigned_resources(shape, spec[P.S_EXTRA])

    def get_accelerator_ids(self) -> dict[str, list[str]]:
        if not self._client.ctx.task_id:
            return {"GPU": []}
        return {"GPU": [str(g) for g in self._client.gpu_ids]}

    def get_placement_group_id(self) -> str | None:
        group = self._client.ctx.group
        return group[0] if group else None

    @property
    def current_actor(self) -> Any:
        from nbdist.driver.actor import _method_table, _rebuild_handle
        from nbdist.wire import protocol as P

        spec = self._actor_spec()
        worker = self._client.worker
        if spec is None or worker is None:
            raise RuntimeError("current_actor is only available in an actor.")
        cls = worker.load_fn(spec[P.S_FID])
        name = self._actor_extra().get("class_name") or cls.__name__
        return _rebuild_handle(self._client.ctx.actor_id, name, _method_table(cls))

    @property
    def was_current_actor_reconstructed(self) -> bool:
        if not self._client.ctx.actor_id:
            raise RuntimeError("was_current_actor_reconstructed is only available in an actor.")
        return bool(self._actor_extra().get("restarts"))

    def is_canceled(self) -> bool:
        worker = self._client.worker
        if worker is None:
            _in_worker("is_canceled()")
        return worker.is_canceled(self._client.ctx.task_id)

    @property
    def namespace(self) -> str:
        return self._namespace

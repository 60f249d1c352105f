"""nbdist's own engine behind the `nbdist.backends.base.Backend` seam (layer L3).

A thin adapter: each call goes to the process's `runtime.CoreClient` (``runtime.current()``,
which starts a cluster on first use in a driver, as Ray does), and ``shutdown`` stops the
`cluster.LocalCluster` that ``init`` started. Queries about the cluster (``nodes``,
``cluster_resources``, ``available_resources``) never start one: a cluster started by a
query would take the place of the ``init(...)`` the user meant to call next.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Sequence
from typing import Any

from nbdist import events as ev
from nbdist.backends.base import current
from nbdist.cluster.local import LocalCluster
from nbdist.driver import runtime, runtime_env
from nbdist.driver.actor import ActorClass, ActorHandle, _rebuild_handle
from nbdist.driver.context import EngineContext
from nbdist.driver.generators import (
    DynamicMarker,
    ObjectRefGenerator,
    StreamMarker,
    backpressure_of,
    stream_task_id,
)
from nbdist.driver.remote_function import RemoteFunction, resource_shape
from nbdist.driver.strategies import placed, strategy_of
from nbdist.exceptions import RuntimeNotInitializedError
from nbdist.objects.refs import ObjectRef
from nbdist.wire import protocol as P


class LocalBackend:
    """The public API on nbdist's engine; one per process (``nbdist.driver.api`` installs it)."""

    driver = True

    def __init__(self) -> None:
        self.cluster: LocalCluster | None = None
        self.namespace = ""
        self.info: dict[str, Any] = {}

    # ------------------------------------------------------------------ life cycle
    def is_initialized(self) -> bool:
        client = current.client
        return client is not None and not client.closed

    def shutdown(self) -> None:
        client = current.client
        runtime.set_client(None)
        if client is not None:
            client.close()
        cluster, self.cluster = self.cluster, None
        if cluster is not None:
            cluster.stop()

    # ------------------------------------------------------------------ tasks and actors
    def submit_task(self, rf: RemoteFunction, args: Sequence[Any],
                    kwargs: dict[str, Any]) -> Any:
        client = runtime.current()
        pickled = None if rf._fid in client._fns else rf._pickle()
        nret = rf._nret
        resources, extra = rf._resources, None
        group = client.ctx.group
        if rf._strategy is not None or group is not None:
            resources, extra = placed(rf._shape, rf._strategy, group, f"task {rf._task_name!r}")
        env = runtime_env.wire(client, rf._options.get("runtime_env"))
        if env is not None:
            extra = {**(extra or {}), "runtime_env": env}
        if type(nret) is str:  # a generator: "streaming" or "dynamic"
            # Its values may be rebuilt from lineage while retries last (`scheduler.lineage`).
            extra = {**(extra or {}), "generator": rf._retries}
            return generator_call(client, nret, backpressure_of(rf._options), args, kwargs,
                                  rf._fid, pickled, rf._task_name, resources, extra,
                                  retries=(rf._retries, rf._retry_exc))
        _, refs = client.submit(rf._fid, pickled, rf._task_name, args, kwargs, nret,
                                resources, rf._retries, rf._retry_exc, extra=extra)
        if nret == 1:
            return refs[0]
        return None if nret == 0 else refs

    def call_method(self, handle: ActorHandle, method: str, nret: Any, task_name: str,
                    args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        if type(nret) is not int:  # a generator: "streaming", ("streaming", n) or "dynamic"
            kind, backpressure = (nret, 0) if type(nret) is str else nret
            return generator_call(runtime.current(), kind, backpressure, args, kwargs, 0, None,
                                  task_name, None, None, handle._actor_id, method)
        _, refs = runtime.current().submit(0, None, task_name, args, kwargs, nret, None, 0,
                                           False, handle._actor_id, method)
        if nret == 1:
            return refs[0]
        return None if nret == 0 else refs

    def create_actor(self, ac: ActorClass, args: Sequence[Any],
                     kwargs: dict[str, Any]) -> ActorHandle:
        client = runtime.current()
        opts = ac._options
        name = opts.get("name")
        namespace = opts.get("namespace")
        if name is not None and opts.get("get_if_exists"):
            try:
                return self.get_actor(name, namespace)
            except ValueError:
                pass
        shape, placing = placed(resource_shape(opts, 0.0), strategy_of(opts), client.ctx.group,
                                f"actor {ac.__name__!r}", actor=True)
        actor_id = client.ids.next()
        meta = pickle.dumps((actor_id, ac.__name__, ac._methods))
        if name is not None:
            namespace = namespace if namespace is not None else self.namespace
            client.control("register_name", (namespace, name, actor_id, meta))
        extra = {
            "max_restarts": _int_opt(opts.get("max_restarts"), 0),
            "max_task_retries": _int_opt(opts.get("max_task_retries"), 0),
            "max_concurrency": opts.get("max_concurrency"),
            "name": name,
            "namespace": namespace,
            "lifetime": opts.get("lifetime"),
            "class_name": ac.__name__,
            "concurrency_groups": opts.get("concurrency_groups"),
            "unordered": ac._runs_concurrently(),
            **(placing or {}),
        }
        if not placing and _default_resources(opts):
            extra["place_cpu"] = 1.0  # as Ray: 1 CPU to be placed, none held while it lives
        env = runtime_env.wire(client, opts.get("runtime_env"))
        if env is not None:
            extra["runtime_env"] = env
        pickled = None if ac._fid in client._fns else ac._pickle()
        handle = ActorHandle(actor_id, ac.__name__, ac._methods, _add=False)
        client.submit(ac._fid, pickled, f"{ac.__name__}.__init__", args, kwargs, 1,
                      shape or (), 0, False, actor_id, P.ACTOR_INIT, extra)
        if client.mode == P.KIND_DRIVER:
            client.publish(ev.ActorCreated(ev.time.time(), f"{actor_id:018x}", ac.__name__,
                                           name))
        return handle

    def kill(self, handle: ActorHandle, no_restart: bool) -> None:
        runtime.current().kill_actor(handle._actor_id, no_restart)

    def get_actor(self, name: str, namespace: str | None) -> ActorHandle:
        client = runtime.current()
        ns = namespace if namespace is not None else (self.namespace if client.mode == "driver"
                                                      else None)
        meta = client.control("get_named", (ns, name, client.job or client.ctx.job))
        if meta is None:
            raise ValueError(
                f"Failed to look up actor {name!r} in namespace {ns or '(default)'!r}: no such "
                "actor is alive. Create it with .options(name=...).remote() first.")
        actor_id, class_name, methods = pickle.loads(meta)
        return _rebuild_handle(actor_id, class_name, methods)

    def list_named_actors(self) -> list[dict[str, str]]:
        """Every live named actor of the cluster: ``{"name", "namespace"}``."""
        return [dict(entry) for entry in runtime.current().control("list_named")]

    # ------------------------------------------------------------------ objects
    def get(self, refs: list[ObjectRef], timeout: float | None) -> list[Any]:
        return runtime.current().get(refs, timeout)

    def put(self, value: Any) -> ObjectRef:
        return runtime.current().put(value)

    def wait(self, refs: list[ObjectRef], num_returns: int, timeout: float | None,
             fetch_local: bool) -> tuple[list[ObjectRef], list[ObjectRef]]:
        return runtime.current().wait(refs, num_returns, timeout, fetch_local)

    def cancel(self, ref: ObjectRef, force: bool, recursive: bool) -> None:
        runtime.current().cancel(ref.id, force, recursive)

    def cancel_submitted(self, tag: str, force: bool) -> int:
        client = runtime.current()
        ids = client.unfinished_tasks(tag)
        for task_id in ids:
            client.cancel_task(task_id, force)
        return len(ids)

    # ------------------------------------------------------------------ cluster
    def nodes(self) -> list[dict[str, Any]]:
        return [{
            "NodeID": n["node_id"],
            "Alive": n.get("alive", True),
            "NodeManagerAddress": n.get("address", ""),
            "NodeManagerHostname": os.uname().nodename,
            "Resources": dict(n.get("total", {})),
            "ObjectStoreUsed": n.get("store_used", 0),
            "ObjectStoreSpilled": n.get("spilled", 0),
            "Pid": n.get("pid", 0),
            "alive": n.get("alive", True),
        } for n in _started("nodes").control("nodes")]

    def cluster_resources(self) -> dict[str, float]:
        return dict(_started("cluster_resources").control("cluster_resources"))

    def available_resources(self) -> dict[str, float]:
        avail = _started("available_resources").control("available_resources")
        return {k: v for k, v in avail.items() if v > 0}

    def runtime_context(self) -> EngineContext:
        return EngineContext(runtime.current(), self.namespace)


def generator_call(client: runtime.CoreClient, kind: str, backpressure: int,
                   args: Sequence[Any], kwargs: dict[str, Any], fid: int, pickled: bytes | None,
                   name: str, resources: tuple | None, extra: dict[str, Any] | None,
                   actor_id: int = 0, method: str | None = None,
                   retries: tuple[int, Any] = (0, False)) -> Any:
    """Submit a generator task or call: its ref (dynamic) or an ObjectRefGenerator.
    ``retries``: (max_retries, retry_exceptions); a stream retries within its call."""
    if kind == "dynamic":
        _, refs = client.submit(fid, pickled, name, (DynamicMarker(), *args), kwargs, 1,
                                resources, *retries, actor_id, method, extra)
        return refs[0]
    task_id = stream_task_id(client)
    marker = StreamMarker(backpressure, retries[0] if retries[1] else 0)
    _, refs = client.submit(fid, pickled, name, (marker, *args), kwargs, 1,
                            resources, 0, retries[1], actor_id, method, extra, task_id=task_id)
    return ObjectRefGenerator(task_id, refs[0], backpressure)


def _started(query: str) -> runtime.CoreClient:
    """The running cluster's client, for a query that must not start one."""
    if current.client is None:
        raise RuntimeNotInitializedError(
            f"nbdist has not been started yet, so nbdist.{query}() has no cluster to ask. "
            "Call nbdist.init() first (with the num_cpus, resources, address, ... you want; "
            "%nbdist start in a notebook).")
    return runtime.current()


def _default_resources(opts: dict[str, Any]) -> bool:
    """Whether an actor asks for no resources (memory aside), where Ray places it only on a
    node with a CPU although it holds none."""
    return (opts.get("num_cpus") is None and not opts.get("num_gpus")
            and not opts.get("resources"))


def _int_opt(value: Any, default: int) -> int:
    if value is None:
        return default
    return -1 if value == -1 else int(value)

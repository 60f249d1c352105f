"""The public API (layer L3): Ray's core names and semantics.

``init`` starts (or, later, attaches to) a cluster and makes this process its driver; the first
remote call, ``put`` or ``get`` does it implicitly with defaults, as in Ray. Queries about the
cluster (``nodes``, ``cluster_resources``, ``available_resources``) never start one: a cluster
started by a query would take the place of the ``init(...)`` the user meant to call next, so
they raise RuntimeNotInitializedError, as Ray does. ``shutdown`` stops what ``init`` started;
it also runs at interpreter exit. Everything else forwards to the process's
`runtime.CoreClient`.
"""

from __future__ import annotations

import atexit
import inspect
import os
import threading
from collections.abc import Sequence
from typing import Any

from . import config as config_mod
from . import events, runtime, tally
from . import protocol as P
from . import remote_function as _rf
from .actor import ActorClass, ActorHandle, _rebuild_handle
from .cluster import LocalCluster
from .context import ContextNames
from .exceptions import ClusterError, RuntimeNotInitializedError
from .ids import hex_id
from .remote_function import RemoteFunction
from .runtime import ObjectRef

_lock = threading.RLock()
_cluster: LocalCluster | None = None
_namespace = ""
_info: dict[str, Any] = {}

_INIT_IGNORED = frozenset({"include_dashboard", "dashboard_host", "dashboard_port",
                           "logging_level", "configure_logging", "log_to_driver_level",
                           "_temp_dir", "_system_config"})


class ClusterInfo(dict):
    """What init() returns: address, node id, session dir, resources (a dict)."""

    @property
    def address_info(self) -> dict[str, Any]:
        return dict(self)

    def __enter__(self) -> ClusterInfo:
        return self

    def __exit__(self, *exc: Any) -> None:
        shutdown()


def init(address: str | None = None, *, backend: str = "nbdist", num_cpus: float | None = None,
         num_gpus: float | None = None, resources: dict[str, float] | None = None,
         object_store_memory: int | None = None, namespace: str | None = None,
         ignore_reinit_error: bool = False, log_to_driver: bool = True,
         **kwargs: Any) -> ClusterInfo:
    """Start a local cluster (head, node daemon, workers) and make this process its driver;
    with ``address="HOST:PORT"`` (or ``"auto"``) attach to a cluster started with
    ``nbdist start`` instead, through its node on this machine (the token comes from
    $NBDIST_TOKEN or from the ``start`` on this machine).

    ``num_cpus`` defaults to the machine's cores; ``num_gpus`` to 0 (declare GPUs to use them);
    ``resources`` adds custom logical resources; ``object_store_memory`` (bytes) bounds the
    shared-memory store (default 30% of RAM).

    ``backend="ray"`` runs everything on Ray instead (see docs/scaling.md): ``address`` None
    starts a local Ray, "auto" or "HOST:PORT" or "ray://HOST:PORT" attaches to a Ray cluster;
    the other keyword arguments go to ``ray.init``."""
    global _cluster
    if backend != "nbdist" or _rf._backend is not None:
        info = _init_backend(backend, address, dict(
            kwargs, num_cpus=num_cpus, num_gpus=num_gpus, resources=resources,
            object_store_memory=object_store_memory), namespace, ignore_reinit_error,
            log_to_driver)
        if info is not None:
            return info
    unknown = sorted(set(kwargs) - _INIT_IGNORED)
    if unknown:
        raise TypeError(
            f"init() got unexpected argument(s) {', '.join(unknown)}. Valid: address, "
            "num_cpus, num_gpus, resources, object_store_memory, namespace, "
            "ignore_reinit_error, log_to_driver.")
    with _lock:
        if runtime._client is not None and not runtime._client.closed:
            if ignore_reinit_error:
                return ClusterInfo(_info)
            raise RuntimeError(
                "nbdist.init() was already called: the cluster is running. Call "
                "nbdist.shutdown() first, or pass ignore_reinit_error=True.")
        if runtime._client is not None:
            _shutdown_locked()
        if address not in (None, "local"):
            if num_cpus is not None or num_gpus is not None or resources is not None or (
                    object_store_memory is not None):
                raise ValueError(
                    "When attaching to a running cluster (address=...), resources are the "
                    "cluster's: do not pass num_cpus, num_gpus, resources or "
                    "object_store_memory; give them to `nbdist start` instead.")
            client = _attach(address)
            events.bus().keep(config_mod.load().event_buffer)
            runtime.set_client(client)
            client.start()
            return _joined(client, namespace, client.info.get("head", ""), "")
        if resources is not None and ({"CPU", "GPU"} & set(resources)):
            raise ValueError("Pass num_cpus / num_gpus, not resources={'CPU'|'GPU': ...}.")
        cfg = config_mod.load({"object_store_memory": object_store_memory,
                               "log_to_driver": log_to_driver})
        cpus = float(num_cpus) if num_cpus is not None else float(os.cpu_count() or 1)
        cluster = LocalCluster(cfg, cpus, float(num_gpus or 0), dict(resources or {}))
        try:
            cluster.start()
            client = cluster.connect()
        except BaseException:
            cluster.stop()
            raise
        _cluster = cluster
        events.bus().keep(cfg.event_buffer)
        runtime.set_client(client)
        client.start()
        return _joined(client, namespace, cluster.node_address, cluster.session_dir)


def _joined(client: runtime.CoreClient, namespace: str | None, address: str,
            session_dir: str) -> ClusterInfo:
    global _namespace, _info
    tally.reset()  # this driver's ids start over: what an earlier one did is not its work
    _namespace = namespace or ""
    if namespace:
        client.control("kv_put", (f"job_namespace:{client.job}", namespace))
    _info = {
        "address": address,
        "node_id": client.node_id,
        "session_dir": session_dir,
        "namespace": _namespace,
        "job_id": hex_id(client.job),
    }
    return ClusterInfo(_info)


def _attach(address: str) -> runtime.CoreClient:
    """Become a driver of the running cluster whose head is at ``address`` ("HOST:PORT", or
    "auto" for the one started on this machine), through a node on this machine."""
    from . import standalone, transport
    from .cluster import hello

    head = standalone.auto_address() if address == "auto" else standalone.head_address(address)
    standalone.use_tls(head)
    secret = standalone.find_token(head)
    node = standalone.pick_local_node(standalone.head_request(head, secret, "nodes"))
    where = standalone.node_connect_address(node)
    try:
        sock = transport.connect(where, secret)
    except OSError as exc:
        raise ClusterError(f"Cannot reach this machine's nbdist node at "
                           f"{standalone.display_address(where)}: {exc}.") from None
    client = hello(sock, P.KIND_DRIVER, secret)
    client.info["head"] = standalone.display_address(head)
    return client


def _auto_init() -> runtime.CoreClient:
    with _lock:
        if runtime._client is None:
            init()
    assert runtime._client is not None
    return runtime._client


runtime.set_auto_init(_auto_init)


def is_initialized() -> bool:
    if _rf._backend is not None:
        return bool(_rf._backend.is_initialized())
    client = runtime._client
    return client is not None and not client.closed


def shutdown() -> None:
    """Stop the cluster this process started; its workers, actors and objects are gone."""
    with _lock:
        _shutdown_locked()


def _shutdown_locked() -> None:
    global _cluster
    backend = _rf._backend
    if backend is not None and backend.driver:
        _rf._backend = None
        backend.shutdown()
    client = runtime._client
    runtime.set_client(None)
    if client is not None:
        client.close()
    if _cluster is not None:
        _cluster.stop()
        _cluster = None


def _init_backend(backend: str, address: str | None, options: dict[str, Any],
                  namespace: str | None, ignore_reinit_error: bool, log_to_driver: bool
                  ) -> ClusterInfo | None:
    """init() for another backend, or when one is installed; None: go on with the engine."""
    global _namespace, _info
    if backend not in ("nbdist", "ray"):
        raise ValueError(f"Unknown backend {backend!r}: choose 'nbdist' (the default) or 'ray'.")
    with _lock:
        if is_initialized():
            if ignore_reinit_error:
                return ClusterInfo(_info)
            raise RuntimeError(
                "nbdist.init() was already called: the cluster is running. Call "
                "nbdist.shutdown() first, or pass ignore_reinit_error=True.")
        _shutdown_locked()
        if backend == "nbdist":
            return None
        from .ray_backend import start

        driver, info = start(address, options, namespace, log_to_driver)
        _rf._backend = driver
        _namespace = info["namespace"]
        _info = info
        return ClusterInfo(info)


atexit.register(shutdown)


def remote(*args: Any, **options: Any) -> Any:
    """``@remote`` or ``@remote(**options)`` on a function (a task) or a class (an actor)."""
    if len(args) == 1 and not options and callable(args[0]):
        return _make_remote(args[0], {})
    if args:
        raise TypeError("Use @remote or @remote(option=value, ...).")

    def decorator(target: Any) -> Any:
        return _make_remote(target, options)

    return decorator


def _make_remote(target: Any, options: dict[str, Any]) -> Any:
    if inspect.isclass(target):
        return ActorClass(target, options)
    if callable(target):
        return RemoteFunction(target, options)
    raise TypeError(f"@remote needs a function or a class, not {type(target).__name__}.")


def _as_refs(value: Any, what: str) -> tuple[list[ObjectRef], bool]:
    if isinstance(value, ObjectRef):
        return [value], True
    if isinstance(value, (list, tuple)):
        for item in value:
            if not isinstance(item, ObjectRef):
                raise TypeError(
                    f"{what}() takes ObjectRefs or a list of them; got an item of type "
                    f"{type(item).__name__}.")
        return list(value), False
    raise TypeError(
        f"{what}() takes an ObjectRef or a list of ObjectRefs, not {type(value).__name__}.")


def get(object_refs: ObjectRef | Sequence[ObjectRef], *, timeout: float | None = None) -> Any:
    """The value(s) of ``object_refs``, waiting for them; raises the task's error if it failed.

    numpy arrays and Arrow data from shared memory come back as zero-copy read-only views."""
    refs, single = _as_refs(object_refs, "get")
    if _rf._backend is not None:
        values = _rf._backend.get(refs, timeout)
    else:
        values = runtime.current().get(refs, timeout)
    return values[0] if single else values


def put(value: Any) -> ObjectRef:
    """Store ``value`` in the object store; returns its ref."""
    if _rf._backend is not None:
        return _rf._backend.put(value)
    return runtime.current().put(value)


def wait(object_refs: Sequence[ObjectRef], *, num_returns: int = 1,
         timeout: float | None = None, fetch_local: bool = True
         ) -> tuple[list[ObjectRef], list[ObjectRef]]:
    """Split ``object_refs`` into (ready, not ready) once ``num_returns`` are ready or the
    timeout passes; ready refs keep the input order."""
    if isinstance(object_refs, ObjectRef):
        raise TypeError("wait() takes a list of ObjectRefs, not a single ObjectRef.")
    refs, _ = _as_refs(object_refs, "wait")
    if len(set(refs)) != len(refs):
        raise ValueError("wait() got the same ObjectRef more than once.")
    if not isinstance(num_returns, int) or num_returns < 0:
        raise ValueError(f"num_returns must be a non-negative int, not {num_returns!r}.")
    if num_returns > len(refs):
        raise ValueError(
            f"num_returns ({num_returns}) cannot exceed the number of refs ({len(refs)}).")
    if _rf._backend is not None:
        return _rf._backend.wait(refs, num_returns, timeout, fetch_local)
    return runtime.current().wait(refs, num_returns, timeout)


def cancel(object_ref: ObjectRef, *, force: bool = False, recursive: bool = True) -> None:
    """Cancel the task that produces ``object_ref``: a queued task never runs; a running one
    gets KeyboardInterrupt, or with ``force=True`` its worker is killed. ``get`` then raises
    TaskCancelledError."""
    if not isinstance(object_ref, ObjectRef):
        raise TypeError(f"cancel() takes an ObjectRef, not {type(object_ref).__name__}.")
    if _rf._backend is not None:
        return _rf._backend.cancel(object_ref, force, recursive)
    runtime.current().cancel(object_ref.id, force)


def cancel_submitted(submitter: str, *, force: bool = False) -> int:
    """Cancel every unfinished task submitted under the tag ``submitter`` (see
    `nbdist.events.set_submitter`), nested tasks included; returns how many were asked to stop.

    This is what interrupting a notebook cell does to the work that cell started."""
    if _rf._backend is not None:
        return _rf._backend.cancel_submitted(submitter, force)
    client = runtime.current()
    ids = client.unfinished_tasks(submitter)
    for task_id in ids:
        client.cancel_task(task_id, force)
    return len(ids)


def kill(actor: ActorHandle, *, no_restart: bool = True) -> None:
    """Kill an actor's process now; pending calls raise ActorDiedError."""
    if not isinstance(actor, ActorHandle):
        raise TypeError(f"kill() takes an ActorHandle, not {type(actor).__name__}.")
    if _rf._backend is not None:
        return _rf._backend.kill(actor, no_restart)
    runtime.current().kill_actor(actor._actor_id, no_restart)


def get_actor(name: str, namespace: str | None = None) -> ActorHandle:
    """The handle of the live actor called ``name``; ValueError if there is none."""
    if _rf._backend is not None:
        return _rf._backend.get_actor(name, namespace)
    client = runtime.current()
    ns = namespace if namespace is not None else (_namespace if client.mode == "driver"
                                                  else None)
    meta = client.control("get_named", (ns, name, client.job or client.ctx.job))
    if meta is None:
        raise ValueError(
            f"Failed to look up actor {name!r} in namespace {ns or '(default)'!r}: no such "
            "actor is alive. Create it with .options(name=...).remote() first.")
    import pickle

    actor_id, class_name, methods = pickle.loads(meta)
    return _rebuild_handle(actor_id, class_name, methods)


def _started(query: str) -> runtime.CoreClient:
    """The running cluster's client, for a query that must not start one."""
    if runtime._client is None:
        raise RuntimeNotInitializedError(
            f"nbdist has not been started yet, so nbdist.{query}() has no cluster to ask. "
            "Call nbdist.init() first (with the num_cpus, resources, address, ... you want; "
            "%nbdist start in a notebook).")
    return runtime.current()


def nodes() -> list[dict[str, Any]]:
    """One dict per node: NodeID, Alive, NodeManagerAddress, Resources, and more."""
    if _rf._backend is not None:
        return _rf._backend.nodes()
    out = []
    for n in _started("nodes").control("nodes"):
        out.append({
            "NodeID": n["node_id"],
            "Alive": n.get("alive", True),
            "NodeManagerAddress": n.get("address", ""),
            "NodeManagerHostname": os.uname().nodename,
            "Resources": dict(n.get("total", {})),
            "ObjectStoreUsed": n.get("store_used", 0),
            "ObjectStoreSpilled": n.get("spilled", 0),
            "Pid": n.get("pid", 0),
            "alive": n.get("alive", True),
        })
    return out


def cluster_resources() -> dict[str, float]:
    if _rf._backend is not None:
        return _rf._backend.cluster_resources()
    return dict(_started("cluster_resources").control("cluster_resources"))


def available_resources() -> dict[str, float]:
    if _rf._backend is not None:
        return _rf._backend.available_resources()
    avail = _started("available_resources").control("available_resources")
    return {k: v for k, v in avail.items() if v > 0}


class RuntimeContext(ContextNames):
    """Where the calling code runs (Ray's get_runtime_context())."""

    def __init__(self, client: runtime.CoreClient) -> None:
        self._client = client

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

    @property
    def namespace(self) -> str:
        return _namespace


def get_runtime_context() -> RuntimeContext:
    if _rf._backend is not None:
        return _rf._backend.runtime_context()
    return RuntimeContext(runtime.current())

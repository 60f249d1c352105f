"""The public API (layer L3): Ray's core names and semantics.

``init`` starts (or, later, attaches to) a cluster and makes this process its driver; the first
remote call, ``put`` or ``get`` does it implicitly with defaults, as in Ray. Queries about the
cluster (``nodes``, ``cluster_resources``, ``available_resources``) never start one: a cluster
started by a query would take the place of the ``init(...)`` the user meant to call next, so
they raise RuntimeNotInitializedError, as Ray does. ``shutdown`` stops what ``init`` started;
it also runs at interpreter exit. Everything else forwards to the process's backend
(`backend.current`): nbdist's engine (`local_backend.LocalBackend`) or Ray.
"""

from __future__ import annotations

import atexit
import inspect
import os
import threading
from collections.abc import Sequence
from typing import Any

from nbdist import config as config_mod
from nbdist import events
from nbdist.backends.base import current, set_backend
from nbdist.backends.local import LocalBackend
from nbdist.cluster.local import LocalCluster
from nbdist.driver import runtime, runtime_env, thin
from nbdist.driver.actor import ActorClass, ActorHandle
from nbdist.driver.context import ContextNames
from nbdist.driver.generators import ObjectRefGenerator, wait_items
from nbdist.driver.remote_function import RemoteFunction
from nbdist.events import tally
from nbdist.exceptions import ClusterError
from nbdist.ids import hex_id
from nbdist.objects.refs import ObjectRef
from nbdist.wire import protocol as P

_lock = threading.RLock()
# nbdist's own engine: the process's backend unless init(backend="ray") installs another.
_local = LocalBackend()
set_backend(_local)

# Ray's dashboard, logging and Prometheus export settings: nbdist has none of these servers
# (its metrics reach `%nbdist status` and the panel), so scripts passing them still run.
_INIT_IGNORED = frozenset({"include_dashboard", "dashboard_host", "dashboard_port",
                           "logging_level", "configure_logging", "log_to_driver_level",
                           "_temp_dir", "_system_config", "_metrics_export_port"})


# Memory protection settings init() takes (also inside _system_config, as Ray scripts pass them).
MEMORY_OPTIONS = ("memory_usage_threshold", "memory_monitor_refresh_ms")


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
    job_config = kwargs.pop("job_config", None)
    if job_config is not None:  # its runtime env and namespace, unless given here (as Ray)
        from nbdist.job_config import init_arguments

        namespace, kwargs["runtime_env"] = init_arguments(job_config, namespace,
                                                          kwargs.get("runtime_env"))
    if backend != "nbdist" or current.backend is not _local:
        info = _init_backend(backend, address, dict(
            kwargs, num_cpus=num_cpus, num_gpus=num_gpus, resources=resources,
            object_store_memory=object_store_memory), namespace, ignore_reinit_error,
            log_to_driver)
        if info is not None:
            return info
    job_env = kwargs.pop("runtime_env", None)
    if kwargs.pop("debug_post_mortem", False):  # a failing task stops for pdb (debugging.md)
        job_env = dict(job_env or {})
        job_env["env_vars"] = {**job_env.get("env_vars", {}), "NBDIST_DEBUG_POST_MORTEM": "1"}
    memory = {k: kwargs.pop(k) for k in MEMORY_OPTIONS if k in kwargs}
    memory.update({k: v for k, v in (kwargs.get("_system_config") or {}).items()
                   if k in MEMORY_OPTIONS})
    unknown = sorted(set(kwargs) - _INIT_IGNORED)
    if unknown:
        raise TypeError(
            f"init() got unexpected argument(s) {', '.join(unknown)}. Valid: address, "
            "num_cpus, num_gpus, resources, object_store_memory, namespace, "
            "ignore_reinit_error, log_to_driver, runtime_env, memory_usage_threshold, "
            "memory_monitor_refresh_ms.")
    with _lock:
        if _local.is_initialized():
            if ignore_reinit_error:
                return ClusterInfo(_local.info)
            raise RuntimeError(
                "nbdist.init() was already called: the cluster is running. Call "
                "nbdist.shutdown() first, or pass ignore_reinit_error=True.")
        if current.client is not None:
            _shutdown_locked()
        runtime_env.set_job_env(job_env)
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
                               "log_to_driver": log_to_driver, **memory})
        cpus = float(num_cpus) if num_cpus is not None else float(os.cpu_count() or 1)
        cluster = LocalCluster(cfg, cpus, float(num_gpus or 0), dict(resources or {}))
        try:
            cluster.start()
            client = cluster.connect()
        except BaseException:
            cluster.stop()
            raise
        _local.cluster = cluster
        events.bus().keep(cfg.event_buffer)
        runtime.set_client(client)
        client.start()
        return _joined(client, namespace, cluster.node_address, cluster.session_dir)


def _joined(client: runtime.CoreClient, namespace: str | None, address: str,
            session_dir: str) -> ClusterInfo:
    tally.reset()  # this driver's ids start over: what an earlier one did is not its work
    _local.namespace = namespace or ""
    if namespace:
        client.control("kv_put", (f"job_namespace:{client.job}", namespace))
    _local.info = {
        "address": address,
        "node_id": client.node_id,
        "session_dir": session_dir,
        "namespace": _local.namespace,
        "job_id": hex_id(client.job),
        "webui_url": "",  # no dashboard server (as Ray's without one): see get_dashboard_url
    }
    return ClusterInfo(_local.info)


def _attach(address: str) -> runtime.CoreClient:
    """Become a driver of the running cluster whose head is at ``address`` ("HOST:PORT", or
    "auto" for the one started on this machine), through a node on this machine."""
    from nbdist.cluster import standalone
    from nbdist.cluster.local import hello
    from nbdist.wire import transport

    if thin.is_thin_address(address):
        return _attach_thin(address)
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


def _attach_thin(address: str) -> runtime.CoreClient:
    """A thin driver (`nbdist.driver.thin`): the token from $NBDIST_TOKEN, TLS from
    $NBDIST_TLS_*, else both from the ``start --head`` on this machine with that client server."""
    from nbdist.cluster import standalone

    session = standalone.client_session(thin.transport_address(address))
    if not standalone.use_tls(None) and session is not None:
        standalone.use_tls(None, session.tls)
    text = os.environ.get("NBDIST_TOKEN") or (session.token if session is not None else "")
    if not text:
        raise ClusterError(f"No token for the cluster at {address}: set NBDIST_TOKEN to the token "
                           "printed by `nbdist start --head`.")
    try:
        secret = bytes.fromhex(text.strip())
    except ValueError:
        raise ClusterError("NBDIST_TOKEN must be the hex token printed by `nbdist start "
                           "--head`.") from None
    return thin.connect(address, secret)


def _auto_init() -> runtime.CoreClient:
    with _lock:
        if current.client is None:
            init()
    assert current.client is not None
    return current.client


runtime.set_auto_init(_auto_init)


def get_dashboard_url() -> str:
    """Ray's ``get_dashboard_url()`` (``init().address_info["webui_url"]``): the dashboard's
    "HOST:PORT". nbdist runs no dashboard server (its views are the notebook's panel and
    ``nbdist status``), so on its engine this is "", as Ray's ``webui_url`` is for a cluster
    started without a dashboard; on backend="ray" it is Ray's."""
    if not is_initialized():
        raise RuntimeError("get_dashboard_url() needs a running cluster: call nbdist.init() "
                           "first.")
    return str(current.backend.info.get("webui_url") or "")


def is_initialized() -> bool:
    return current.backend.is_initialized()


def shutdown() -> None:
    """Stop the cluster this process started; its workers, actors and objects are gone."""
    with _lock:
        _shutdown_locked()


def _shutdown_locked() -> None:
    backend = current.backend
    if backend is not _local and backend.driver:
        set_backend(_local)
        backend.shutdown()
    _local.shutdown()
    runtime_env.set_job_env(None)


def _init_backend(backend: str, address: str | None, options: dict[str, Any],
                  namespace: str | None, ignore_reinit_error: bool, log_to_driver: bool
                  ) -> ClusterInfo | None:
    """init() for another backend, or when one is installed; None: go on with the engine."""
    if backend not in ("nbdist", "ray"):
        raise ValueError(f"Unknown backend {backend!r}: choose 'nbdist' (the default) or 'ray'.")
    with _lock:
        if is_initialized():
            if ignore_reinit_error:
                return ClusterInfo(current.backend.info)
            raise RuntimeError(
                "nbdist.init() was already called: the cluster is running. Call "
                "nbdist.shutdown() first, or pass ignore_reinit_error=True.")
        _shutdown_locked()
        if backend == "nbdist":
            return None
        from nbdist.backends.ray import start

        driver, info = start(address, options, namespace, log_to_driver)
        driver.info = info
        set_backend(driver)
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
    values = current.backend.get(refs, timeout)
    return values[0] if single else values


def put(value: Any) -> ObjectRef:
    """Store ``value`` in the object store; returns its ref."""
    return current.backend.put(value)


def wait(object_refs: list[ObjectRef], *, num_returns: int = 1,
         timeout: float | None = None, fetch_local: bool = True
         ) -> tuple[list[ObjectRef], list[ObjectRef]]:
    """Split ``object_refs`` (a list of refs and generators) into (ready, not ready) once
    ``num_returns`` are ready or the timeout passes; ready refs keep the input order.

    As in Ray: an empty list gives ``([], [])``; ``num_returns`` goes from 1 to the number of
    refs, each ref appears once, and ``timeout`` is None (no limit) or at least 0."""
    if not isinstance(object_refs, list):
        if isinstance(object_refs, (ObjectRef, ObjectRefGenerator)):
            raise TypeError("wait() takes a list of ObjectRefs, not a single "
                            f"{type(object_refs).__name__}: pass [ref].")
        raise TypeError("wait() takes a list of ObjectRefs (or ObjectRefGenerators), not a "
                        f"{type(object_refs).__name__}.")
    if timeout is not None and timeout < 0:
        raise ValueError(f"wait()'s timeout must be None or at least 0, not {timeout!r}.")
    generators = False
    for item in object_refs:
        if not isinstance(item, ObjectRef):
            if not isinstance(item, ObjectRefGenerator):
                raise TypeError(
                    "wait() takes a list of ObjectRefs (or ObjectRefGenerators); got an item "
                    f"of type {type(item).__name__}.")
            generators = True
    if not object_refs:
        return [], []
    if len(set(object_refs)) != len(object_refs):
        raise ValueError("wait() got the same ObjectRef more than once: pass each ref once.")
    if num_returns <= 0:
        raise ValueError(f"wait()'s num_returns must be at least 1, not {num_returns!r}.")
    if num_returns > len(object_refs):
        raise ValueError(f"wait()'s num_returns ({num_returns}) cannot exceed the number of "
                         f"refs ({len(object_refs)}).")
    if generators:
        return wait_items(list(object_refs), int(num_returns), timeout, fetch_local)
    return current.backend.wait(list(object_refs), int(num_returns), timeout, fetch_local)


def cancel(object_ref: ObjectRef, *, force: bool = False, recursive: bool = True) -> None:
    """Cancel the task that produces ``object_ref``: a queued task never runs; a running one
    gets KeyboardInterrupt, or with ``force=True`` its worker is killed. ``get`` then raises
    TaskCancelledError. ``recursive`` (as Ray): the tasks it submitted are cancelled too."""
    if isinstance(object_ref, ObjectRefGenerator):
        object_ref = object_ref.completed()  # the generator's task
    if not isinstance(object_ref, ObjectRef):
        raise TypeError(f"cancel() takes an ObjectRef, not {type(object_ref).__name__}.")
    current.backend.cancel(object_ref, force, recursive)


def cancel_submitted(submitter: str, *, force: bool = False) -> int:
    """Cancel every unfinished task submitted under the tag ``submitter`` (see
    `nbdist.events.set_submitter`), nested tasks included; returns how many were asked to stop.

    This is what interrupting a notebook cell does to the work that cell started."""
    return current.backend.cancel_submitted(submitter, force)


def kill(actor: ActorHandle, *, no_restart: bool = True) -> None:
    """Kill an actor's process now; pending calls raise ActorDiedError."""
    if not isinstance(actor, ActorHandle):
        raise TypeError(f"kill() takes an ActorHandle, not {type(actor).__name__}.")
    current.backend.kill(actor, no_restart)


def get_actor(name: str, namespace: str | None = None) -> ActorHandle:
    """The handle of the live actor called ``name``; ValueError if there is none."""
    return current.backend.get_actor(name, namespace)


def list_named_actors(all_namespaces: bool = False) -> list[Any]:
    """The names of the live named actors of the caller's namespace (Ray's
    ``ray.util.list_named_actors``); with ``all_namespaces``, ``{"name", "namespace"}`` dicts
    of every namespace."""
    entries = current.backend.list_named_actors()
    if all_namespaces:
        return entries
    namespace = current.backend.runtime_context().namespace
    return [e["name"] for e in entries if e["namespace"] == namespace]


def nodes() -> list[dict[str, Any]]:
    """One dict per node: NodeID, Alive, NodeManagerAddress, Resources, and more."""
    return current.backend.nodes()


def cluster_resources() -> dict[str, float]:
    return current.backend.cluster_resources()


def available_resources() -> dict[str, float]:
    return current.backend.available_resources()


def get_runtime_context() -> ContextNames:
    """Where the calling code runs (Ray's get_runtime_context())."""
    return current.backend.runtime_context()

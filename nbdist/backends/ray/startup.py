"""Starting nbdist on Ray (layer L3): start or attach to a Ray cluster, build the driver's
`RayBackend`, guard the Ray session's processes so none outlive the driver, and start the
driver-side sink that workers send output and records to.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from nbdist import events as ev
from nbdist.backends.ray import worker
from nbdist.backends.ray.backend import AGENT_START_TIMEOUT_MS, RayBackend, import_ray
from nbdist.backends.ray.runtime_env import Shipper
from nbdist.exceptions import ClusterError

log = logging.getLogger("nbdist.backends.ray.backend")


def start(address: str | None, init_kwargs: dict[str, Any], namespace: str | None,
          log_to_driver: bool) -> tuple[RayBackend, dict[str, Any]]:
    """Start or attach to Ray and build the driver's backend; returns it and init()'s info.

    ``address`` None starts a new local Ray (or attaches to ``$RAY_ADDRESS`` when set);
    "auto" attaches to the Ray started on this machine with ``ray start``; "ray://HOST:PORT"
    attaches through Ray Client; "HOST:PORT" attaches to that cluster's GCS."""
    ray = import_ray()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    backend = RayBackend("driver")
    backend.log_to_driver = log_to_driver
    if ray.is_initialized():
        raise ClusterError(
            "Ray is already initialized in this process (ray.init() was called directly). "
            "Call ray.shutdown() first, then nbdist.init(backend='ray').")
    kwargs = {k: v for k, v in init_kwargs.items() if v is not None}
    kwargs.setdefault("include_dashboard", False)
    # nbdist's init() arguments for memory protection are Ray's system config entries.
    memory = {k: kwargs.pop(k) for k in ("memory_usage_threshold", "memory_monitor_refresh_ms")
              if k in kwargs}
    if memory:
        kwargs["_system_config"] = {**(kwargs.get("_system_config") or {}), **memory}
    if address is None:
        address = os.environ.get("RAY_ADDRESS") or "local"
    if address == "local":
        # A new node's raylet waits for its dashboard agent to start; on a loaded machine the
        # agent's Python start-up can outlast Ray's default wait, and the raylet then aborts.
        system = dict(kwargs.get("_system_config") or {})
        system.setdefault("agent_register_timeout_ms", AGENT_START_TIMEOUT_MS)
        kwargs["_system_config"] = system
    with local_start_lock() if address == "local" else contextlib.nullcontext():
        try:
            info = ray.init(address=address, namespace=namespace,
                            log_to_driver=log_to_driver, **kwargs)
        except Exception as exc:
            if address != "local" or "timed out during startup" not in str(exc):
                raise
            # Ray gives a new local node a fixed 30 s to register; on an overloaded machine
            # that can run out although nothing is wrong. Ray has cleaned up; one more try.
            log.warning("nbdist: Ray's local start timed out (%s); trying once more", exc)
            info = ray.init(address=address, namespace=namespace,
                            log_to_driver=log_to_driver, **kwargs)
    backend.owns_ray = True
    details = dict(getattr(info, "address_info", None) or {})
    backend.shipper = Shipper(details.get("session_dir", ""))
    try:
        if address == "local" and details.get("session_dir"):
            backend.guard = _start_guard(details["session_dir"])
        _start_driver(ray, backend, address == "local")
    except BaseException:
        backend.shutdown()
        raise
    ctx = ray.get_runtime_context()
    return backend, {
        "backend": "ray",
        "address": details.get("gcs_address") or details.get("address") or address,
        "node_id": ctx.get_node_id(),
        "session_dir": details.get("session_dir", ""),
        "namespace": ctx.namespace,
        "job_id": ctx.get_job_id(),
        "webui_url": details.get("webui_url"),
    }


@contextlib.contextmanager
def local_start_lock() -> Iterator[None]:
    """Held while a new local Ray node starts: one at a time on this machine. A node's start
    (GCS, raylet, agents: a dozen Python processes) takes most of two cores for seconds, and
    Ray gives each part a fixed time; two notebooks (or test runs) starting Ray at once on a
    small machine starved each other until both timed out."""
    path = os.path.join(tempfile.gettempdir(), "nbdist-ray-start.lock")
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _start_guard(session_dir: str) -> Any:
    """The process that ends this local Ray's stragglers when the driver is gone (guard.py)."""
    import subprocess

    from nbdist.backends.ray import guard

    # Run as a plain script (-I -S: no site, no nbdist package): it only reads /proc, and
    # should not take CPU from Ray's start-up importing what it does not use.
    return subprocess.Popen([sys.executable, "-I", "-S", guard.__file__, session_dir],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def _start_driver(ray: Any, backend: RayBackend, local: bool) -> None:
    from nbdist.backends.ray.state import StatePoller

    ctx = ray.get_runtime_context()
    job = ctx.get_job_id()
    backend.namespace = ctx.namespace
    backend.node_id = ctx.get_node_id()
    backend.worker_id = ctx.get_worker_id()
    backend.pump = _start_sink(ray, backend, job, local)
    backend.poller = StatePoller(job, ev.publish, backend._ended)
    if not ray.util.client.ray.is_connected():
        backend.poller.start()
    now = time.time()
    for n in ray.nodes():
        if n.get("Alive"):
            ev.publish(ev.NodeUp(now, n["NodeID"], n.get("NodeManagerAddress", ""),
                                 {k: float(v) for k, v in n.get("Resources", {}).items()}))


def _start_sink(ray: Any, backend: RayBackend, job: str, local: bool) -> Any:
    """The driver's end of the output channel (sink.py): a server of this process, or an
    actor when the cluster cannot reach this process (Ray Client)."""
    from nbdist.backends.ray.sink import OutputPump, OutputServer, OutputSink

    if ray.util.client.ray.is_connected():
        name = f"nbdist-output-{job}-{os.getpid()}"
        actor = ray.remote(OutputSink).options(
            name=name, namespace=worker.SINK_NAMESPACE, num_cpus=0).remote()
        backend.sink = name
        pump: Any = OutputPump(actor, backend.on_records)
    else:
        host = "127.0.0.1" if local else ray.util.get_node_ip_address()
        pump = OutputServer(host, backend.on_records)
        backend.sink = pump.target
    pump.start()
    # Workers read it once each (worker.job_sink), rather than every call carrying it.
    import pickle

    from ray.experimental import internal_kv

    internal_kv._internal_kv_put(worker.sink_key(job), pickle.dumps(backend.sink),
                                 namespace=worker.SINK_NAMESPACE)
    return pump

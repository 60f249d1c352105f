"""nbdist: a Jupyter kernel as the driver of a distributed computation.

Ray's core programming model (remote functions and actors, object refs, get/put/wait) on a
local cluster with a shared-memory object store; code written for Ray's core API runs with
``import nbdist as ray``. The names below are the whole public surface.
"""

from . import events, exceptions, util  # util: like ray.util, part of `import nbdist`
from .actor import ActorClass, ActorHandle, method
from .api import (
    available_resources,
    cancel,
    cancel_submitted,
    cluster_resources,
    get,
    get_actor,
    get_runtime_context,
    init,
    is_initialized,
    kill,
    nodes,
    put,
    remote,
    shutdown,
    wait,
)
from .remote_function import RemoteFunction
from .runtime import ObjectRef

__version__ = "0.1.0"


def load_ipython_extension(ip: object) -> None:
    """``%load_ext nbdist``: the notebook layer is imported only here, so the engine stays free
    of IPython and widgets for scripts."""
    from .jupyter import load_ipython_extension as load

    load(ip)


def unload_ipython_extension(ip: object) -> None:
    from .jupyter import unload_ipython_extension as unload

    unload(ip)


def timeline(filename: str | None = None) -> list[dict]:
    """Chrome-trace events, one per task execution of this cluster (like ``ray.timeline``);
    with ``filename``, also written there as JSON for chrome://tracing or Perfetto."""
    from .tracing import timeline as _timeline

    return _timeline(filename)


def show() -> object:
    """An inline live view of the cluster (task graph, object store, waits, timeline) for
    frontends without the JupyterLab panel; returns it (``.close()`` stops it)."""
    from .jupyter.liveview import show as _show

    return _show()


__all__ = [
    "ActorClass",
    "ActorHandle",
    "ObjectRef",
    "RemoteFunction",
    "available_resources",
    "cancel",
    "cancel_submitted",
    "cluster_resources",
    "events",
    "exceptions",
    "get",
    "get_actor",
    "get_runtime_context",
    "init",
    "is_initialized",
    "kill",
    "method",
    "nodes",
    "put",
    "remote",
    "show",
    "shutdown",
    "timeline",
    "util",
    "wait",
]

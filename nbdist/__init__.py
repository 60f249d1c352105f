"""nbdist: a Jupyter kernel as the driver of a distributed computation.

Ray's core programming model (remote functions and actors, object refs, get/put/wait) on a
local cluster with a shared-memory object store; code written for Ray's core API runs with
``import nbdist as ray``. The names below are the whole public surface.
"""

from . import events, exceptions
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
    "shutdown",
    "wait",
]

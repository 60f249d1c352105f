"""nbdist: a Jupyter kernel as the driver of a distributed computation.

Ray's core programming model (remote functions and actors, object refs, get/put/wait) on a
local cluster with a shared-memory object store; code written for Ray's core API runs with
``import nbdist as ray``. The names below are the whole public surface.
"""

import sys as _sys
from collections.abc import Callable

import cloudpickle as cloudpickle  # `from ray import cloudpickle`; kept out of __all__

from nbdist import actor as actor  # `ray.actor.ActorHandle` in annotations; kept out of __all__
from nbdist import events, exceptions, util  # util: like ray.util, part of `import nbdist`
from nbdist import job_config as job_config  # `ray.job_config.JobConfig`; kept out of __all__
from nbdist import ray_types as types  # `ray.types.ObjectRef[int]`; kept out of __all__
from nbdist.driver.actor import ActorClass, ActorHandle, method
from nbdist.driver.api import (
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
from nbdist.driver.api import get_dashboard_url as get_dashboard_url  # not in Ray's __all__
from nbdist.driver.generators import DynamicObjectRefGenerator, ObjectRefGenerator
from nbdist.driver.groups import get_gpu_ids
from nbdist.driver.remote_function import RemoteFunction
from nbdist.driver.stepping import StepStatus, step, step_mode
from nbdist.objects.refs import ObjectRef

ObjectID = ObjectRef  # Ray's older name, kept as Ray keeps it
_sys.modules[__name__ + ".types"] = types

__version__ = "0.1.0"


def load_ipython_extension(ip: object) -> None:
    """``%load_ext nbdist``: the notebook layer is imported only here (IPython's entry point),
    so the engine stays free of IPython and widgets for scripts. IPython calls
    ``unload_ipython_extension`` only after this, so the layer's unload is kept from here."""
    from nbdist.jupyter import load_ipython_extension as load
    from nbdist.jupyter import unload_ipython_extension as unload

    _notebook_layer["unload"] = unload
    load(ip)


def unload_ipython_extension(ip: object) -> None:
    unload = _notebook_layer.get("unload")
    if unload is not None:
        unload(ip)


_notebook_layer: dict[str, Callable[[object], None]] = {}


def timeline(filename: str | None = None) -> list[dict]:
    """Chrome-trace events, one per task execution of this cluster (like ``ray.timeline``);
    with ``filename``, also written there as JSON for chrome://tracing or Perfetto."""
    from nbdist.events.tracing import timeline as _timeline

    return _timeline(filename)


def show(show_internal: bool = False) -> object:
    """The panel's live views inline, in any notebook frontend (an anywidget; a static snapshot
    where no widget manager runs); returns it (``.close()`` removes it). ``show_internal``:
    draw the calls nbdist's libraries make for their runs too."""
    from nbdist.jupyter.widget import show as _show

    return _show(show_internal)


__all__ = [
    "ActorClass",
    "ActorHandle",
    "DynamicObjectRefGenerator",
    "ObjectID",
    "ObjectRef",
    "ObjectRefGenerator",
    "RemoteFunction",
    "StepStatus",
    "available_resources",
    "cancel",
    "cancel_submitted",
    "cluster_resources",
    "events",
    "exceptions",
    "get",
    "get_actor",
    "get_gpu_ids",
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
    "step",
    "step_mode",
    "timeline",
    "util",
    "wait",
]

# `import ray.cloudpickle` / `from ray.cloudpickle import dumps` spelled for nbdist: the
# cloudpickle nbdist serializes with, reachable as a submodule (a file of that name in this
# package would shadow the real one wherever this folder is on sys.path).
_sys.modules.setdefault(__name__ + ".cloudpickle", cloudpickle)


def __getattr__(name: str) -> object:
    """``nbdist.data`` (Ray Data's API) and ``nbdist.rllib`` are imported on first use, as
    ``import ray`` does not import ``ray.data`` either: the engine stays free of it."""
    if name in ("data", "rllib"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The public surface is pinned, and the engine imports no UI packages."""

from __future__ import annotations

import subprocess
import sys

import nbdist
from nbdist import exceptions

EXPECTED = {
    "ActorClass", "ActorHandle", "DynamicObjectRefGenerator", "ObjectID", "ObjectRef", "ObjectRefGenerator",
    "RemoteFunction", "StepStatus", "available_resources",
    "cancel", "cancel_submitted", "cluster_resources", "events", "exceptions", "get", "get_actor", "get_gpu_ids",
    "get_runtime_context", "init", "is_initialized", "kill", "method", "nodes", "put",
    "remote", "show", "shutdown", "step", "step_mode", "timeline", "util", "wait",
}


def test_public_names() -> None:
    assert set(nbdist.__all__) == EXPECTED
    for name in EXPECTED:
        assert hasattr(nbdist, name)
    # Reached as attributes after `import nbdist`, as in Ray, but not star-exported.
    assert nbdist.job_config.JobConfig().runtime_env == {}


def test_error_tree_and_ray_aliases() -> None:
    for name in ("TaskError", "ActorError", "ActorDiedError", "GetTimeoutError",
                 "WorkerCrashedError", "TaskCancelledError", "ObjectLostError",
                 "ObjectStoreFullError", "SerializationError"):
        assert issubclass(getattr(exceptions, name), exceptions.NbdistError)
    assert exceptions.RayTaskError is exceptions.TaskError
    assert exceptions.RayActorError is exceptions.ActorError
    assert issubclass(exceptions.ActorDiedError, exceptions.RayActorError)
    assert issubclass(exceptions.GetTimeoutError, TimeoutError)


def test_engine_imports_no_ui_or_heavy_packages() -> None:
    code = (
        "import sys, nbdist\n"
        "bad = [m for m in ('IPython', 'ipykernel', 'ipywidgets', 'bokeh', 'numpy', 'pyarrow')"
        " if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == ""


def test_remote_function_direct_call_is_a_type_error() -> None:
    @nbdist.remote
    def f() -> int:
        return 1

    try:
        f()
    except TypeError as exc:
        assert ".remote(" in str(exc)
    else:
        raise AssertionError("calling a remote function directly must raise TypeError")


def test_unknown_option_lists_valid_ones() -> None:
    try:
        nbdist.remote(num_cpu=1)(lambda: 1)
    except ValueError as exc:
        assert "num_cpus" in str(exc) and "num_cpu" in str(exc)
    else:
        raise AssertionError("unknown options must be rejected")


def test_remote_errors_of_types_with_their_own_allocator_stay_catchable() -> None:
    from nbdist.exceptions import ObjectStoreFullError, TaskError

    for cause in (ObjectStoreFullError("full"), MemoryError("m"), FileNotFoundError(2, "gone"),
                  KeyError("k")):
        err = TaskError("f", "tb", cause, 1, "t").as_instanceof_cause()
        assert isinstance(err, TaskError) and isinstance(err, type(cause))
        assert err.args == cause.args


def test_ray_type_names() -> None:
    import nbdist.types

    assert nbdist.ObjectID is nbdist.ObjectRef is nbdist.types.ObjectRef
    assert nbdist.types.ObjectRef[int].__origin__ is nbdist.ObjectRef

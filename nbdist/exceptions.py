"""The nbdist error tree (layer L0: stdlib only).

::

    NbdistError                          root of everything nbdist raises on purpose
    ├── TaskError (RayTaskError)         a remote task or actor method raised; `get` raises an
    │                                    instance of both TaskError and the user's own type
    ├── ActorError (RayActorError)       an actor cannot run the call
    │   └── ActorDiedError               the actor process died (restarts used up), was killed,
    │                                    or its __init__ raised
    ├── GetTimeoutError                  `get(..., timeout=)` ran out (also a TimeoutError)
    ├── WorkerCrashedError               the worker process running a task died and the retries
    │                                    (max_retries) were used up
    ├── OutOfMemoryError                 the node's memory monitor killed the task's worker (the
    │                                    machine's memory was past memory_usage_threshold) and
    │                                    the retries were used up
    ├── TaskCancelledError               `cancel()` stopped the task
    ├── DebuggerQuit                     a task paused in the debugger was ended with pdb's q
    ├── TaskPlacementGroupRemoved        the task's placement group was removed (or can
    │                                    never be placed) before or while it ran
    ├── ObjectLostError                  the object's value is gone and cannot be rebuilt
    ├── ObjectStoreFullError             the value does not fit in the object store
    ├── SerializationError               a value could not be pickled or unpickled (also a
    │                                    TypeError, as pickle raises for unpicklable values)
    ├── RuntimeNotInitializedError       an API call that needs a cluster found none
    └── ClusterError                     the cluster processes could not start or were lost

Every message says what happened and, where there is one, what to try.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = [
    "NbdistError",
    "TaskError",
    "ActorError",
    "ActorDiedError",
    "ActorUnavailableError",
    "GetTimeoutError",
    "WorkerCrashedError",
    "OutOfMemoryError",
    "TaskCancelledError",
    "DebuggerQuit",
    "TaskPlacementGroupRemoved",
    "ObjectLostError",
    "ObjectStoreFullError",
    "SerializationError",
    "RuntimeNotInitializedError",
    "ClusterError",
    "StepModeUnavailable",
    "RayError",
    "RayTaskError",
    "RayActorError",
]


class NbdistError(Exception):
    """Root of the nbdist error tree."""


class TaskError(NbdistError):
    """A remote task raised. `get` raises it as an instance of the user's type as well.

    Attributes: ``function_name``, ``cause`` (the user's exception, or None when it could not
    be pickled), ``remote_traceback`` (text), ``pid`` and ``task_id`` of the failed attempt.
    """

    function_name: str = "?"
    cause: BaseException | None = None
    remote_traceback: str = ""
    pid: int = 0
    task_id: str = ""

    def __init__(
        self,
        function_name: str = "?",
        remote_traceback: str = "",
        cause: BaseException | None = None,
        pid: int = 0,
        task_id: str = "",
    ) -> None:
        super().__init__(function_name, remote_traceback)
        self.function_name = function_name
        self.remote_traceback = remote_traceback
        self.cause = cause
        self.pid = pid
        self.task_id = task_id

    def __str__(self) -> str:
        return _task_error_text(self)

    def as_instanceof_cause(self) -> TaskError:
        """Return an exception that is both this TaskError and an instance of the cause's type."""
        cause = self.cause
        if cause is None or isinstance(cause, TaskError):
            return self
        dual = _dual_class(type(cause))
        if dual is None:
            return self
        err: Any
        try:
            err = dual.__new__(dual)  # type: ignore[call-overload]
        except TypeError:
            # Causes deriving from C types with their own allocator (MemoryError ...) refuse a
            # bare __new__: build it through TaskError.__init__ instead.
            try:
                err = dual(self.function_name, self.remote_traceback, cause, self.pid,
                           self.task_id)
            except Exception:
                return self
        err.args = cause.args
        err.__dict__.update(getattr(cause, "__dict__", {}))
        err.function_name = self.function_name
        err.remote_traceback = self.remote_traceback
        err.cause = cause
        err.pid = self.pid
        err.task_id = self.task_id
        assert isinstance(err, TaskError)
        return err

    def __reduce__(self) -> Any:
        return (
            _rebuild_task_error,
            (self.function_name, self.remote_traceback, self.cause, self.pid, self.task_id),
        )


def _rebuild_task_error(
    function_name: str, tb: str, cause: BaseException | None, pid: int, task_id: str
) -> TaskError:
    return TaskError(function_name, tb, cause, pid, task_id).as_instanceof_cause()


def _task_error_text(err: TaskError) -> str:
    head = f"{type(err.cause).__name__ if err.cause is not None else 'Error'} in task " + (
        f"'{err.function_name}' (pid={err.pid})"
    )
    tb = err.remote_traceback.rstrip()
    return f"{head}\n{tb}" if tb else head


_dual_lock = threading.Lock()
_dual_cache: dict[type, type] = {}


def _dual_class(cause_type: type) -> type | None:
    """A class deriving from both TaskError and ``cause_type`` (cached), or None if impossible."""
    with _dual_lock:
        if cause_type in _dual_cache:
            return _dual_cache[cause_type]
        try:
            dual: type = type(
                f"TaskError({cause_type.__name__})",
                (TaskError, cause_type),
                {
                    "__init__": TaskError.__init__,
                    "__str__": TaskError.__str__,
                    "__reduce__": TaskError.__reduce__,
                    "__module__": cause_type.__module__,
                },
            )
        except TypeError:
            # Layout conflicts (e.g. some C exception types) cannot be combined.
            return None
        _dual_cache[cause_type] = dual
        return dual


class ActorError(NbdistError):
    """An actor could not run a method call."""

    def __init__(self, message: str = "The actor could not run the call.", actor_id: str = ""):
        super().__init__(message)
        self.actor_id = actor_id


class ActorDiedError(ActorError):
    """The actor's process died, it was killed, or its constructor raised."""


class ActorUnavailableError(ActorError):
    """The actor is restarting; the call may be tried again."""


class GetTimeoutError(NbdistError, TimeoutError):
    """`get` or `wait` with a timeout ran out before the values were ready."""


class WorkerCrashedError(NbdistError):
    """The worker process died while running the task and its retries were used up."""


class OutOfMemoryError(NbdistError):
    """The node ran short of memory and killed the worker running the task (the most recently
    started retriable one) and its retries were used up."""


class TaskCancelledError(NbdistError):
    """The task was cancelled with `cancel()` before it finished."""


class DebuggerQuit(NbdistError):
    """A task paused at a breakpoint (or post-mortem) was ended with pdb's ``q``."""


class TaskPlacementGroupRemoved(NbdistError):
    """The task's placement group was removed (or can never be placed) before it ran."""


class ObjectLostError(NbdistError):
    """The object's value was lost (its copy is gone and it cannot be rebuilt)."""


class ObjectStoreFullError(NbdistError, MemoryError):
    """The object does not fit into the object store even after freeing what can be freed."""


class SerializationError(NbdistError, TypeError):
    """A value could not be serialized or deserialized."""


class RuntimeNotInitializedError(NbdistError, RuntimeError):
    """The call needs a running cluster; call nbdist.init() first."""


class ClusterError(NbdistError, RuntimeError):
    """The cluster's processes could not be started or were lost."""


class StepModeUnavailable(NbdistError):
    """Step-through mode needs nbdist's own engine (this session runs on another backend)."""


# Ray's names, so `except ray.exceptions.RayTaskError` style code keeps working.
RayError = NbdistError
RayTaskError = TaskError
RayActorError = ActorError

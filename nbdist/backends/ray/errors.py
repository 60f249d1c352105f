"""Ray's exceptions as nbdist's (see the tree in `nbdist.exceptions`).

Task failures travel as a `TaskFailure` raised by the task wrapper (worker.py): it carries an
nbdist `TaskError` whose traceback already has the engine's frames removed and whose cause was
checked to pickle. Ray wraps it in its own ``RayTaskError``; `translate` unwraps it again, so
``get`` raises an exception that is both a TaskError and the user's own type, exactly as on
nbdist's engine. Everything else Ray raises maps by kind:

    ray GetTimeoutError                   GetTimeoutError
    ray TaskCancelledError                TaskCancelledError
    ray ActorDiedError / RayActorError    ActorDiedError (the constructor's traceback in the
                                          message when __init__ raised)
    ray ActorUnavailableError             ActorUnavailableError
    ray WorkerCrashedError                WorkerCrashedError
    ray OutOfMemoryError                  OutOfMemoryError
    ray ObjectLostError and its kinds     ObjectLostError
    ray ObjectStoreFullError              ObjectStoreFullError
    ray RaySystemError, node died         ClusterError
    ray RayTaskError of another cause     TaskError (dual with the cause's type)
"""

from __future__ import annotations

from typing import Any

from nbdist.exceptions import (
    ActorDiedError,
    ActorUnavailableError,
    ClusterError,
    GetTimeoutError,
    NbdistError,
    ObjectLostError,
    ObjectStoreFullError,
    OutOfMemoryError,
    TaskCancelledError,
    TaskError,
    TaskPlacementGroupRemoved,
    WorkerCrashedError,
)


class TaskFailure(Exception):
    """Raised by the task wrapper in a Ray worker; ``args[0]`` is the nbdist TaskError."""

    @property
    def error(self) -> TaskError:
        err = self.args[0]
        assert isinstance(err, TaskError)
        return err


class RetryableTaskFailure(TaskFailure):
    """A TaskFailure whose cause matches the task's ``retry_exceptions``: Ray retries it."""


def translate(exc: BaseException) -> BaseException:
    """The nbdist exception for an exception raised by a Ray API call (others unchanged)."""
    import ray.exceptions as rex

    if isinstance(exc, NbdistError):
        return exc
    if isinstance(exc, rex.RayTaskError):
        return _task_error(exc)
    if isinstance(exc, rex.GetTimeoutError):
        return GetTimeoutError(str(exc))
    if isinstance(exc, rex.TaskCancelledError):
        return TaskCancelledError(f"The task was cancelled with cancel(): {exc}")
    if isinstance(exc, rex.TaskPlacementGroupRemoved):
        return TaskPlacementGroupRemoved(f"The task's placement group was removed: {exc}")
    if isinstance(exc, rex.ActorUnavailableError):
        return ActorUnavailableError(str(exc))
    if isinstance(exc, rex.RayActorError):
        return ActorDiedError(_actor_text(exc))
    if isinstance(exc, rex.OutOfMemoryError):
        return OutOfMemoryError(f"Ray's memory monitor killed the task's worker and its "
                                f"retries were used up: {exc}")
    if isinstance(exc, rex.WorkerCrashedError):
        return WorkerCrashedError(
            f"The worker process running the task died and its retries (max_retries) were "
            f"used up: {exc}")
    if isinstance(exc, rex.ObjectStoreFullError):
        return ObjectStoreFullError(str(exc))
    if isinstance(exc, rex.ObjectLostError):
        return ObjectLostError(str(exc))
    if isinstance(exc, (rex.RaySystemError, rex.NodeDiedError, rex.LocalRayletDiedError)):
        return ClusterError(f"The Ray cluster failed: {exc}")
    return exc


def _task_error(exc: Any) -> BaseException:
    cause = getattr(exc, "cause", None)
    if isinstance(cause, TaskFailure):
        return cause.error
    if isinstance(cause, BaseException) and not isinstance(cause, TaskError):
        # A Ray-level failure inside the task (e.g. its arguments failed to deserialize).
        inner = translate(cause)
        if inner is not cause:
            return inner
    name = getattr(exc, "function_name", "?")
    err = TaskError(name, getattr(exc, "traceback_str", "") or str(exc),
                    cause if isinstance(cause, BaseException) else None,
                    getattr(exc, "pid", 0) or 0)
    return err.as_instanceof_cause()


def _actor_text(exc: Any) -> str:
    """What a dead actor's error says: the constructor's error when that is what killed it."""
    import ray.exceptions as rex

    cause = getattr(exc, "cause", None) or getattr(exc, "_cause", None)
    if isinstance(cause, rex.RayTaskError):
        inner = _task_error(cause)
        if isinstance(inner, TaskError):
            return (f"The actor died because its constructor raised {inner}\n"
                    "Every call to this actor fails; create a new one.")
    return f"The actor is dead and cannot run the call: {exc}"


__all__ = ["RetryableTaskFailure", "TaskFailure", "translate"]

"""The seam between the public API and the engine that runs it (layer L2, imports nothing).

`Backend` names what ``nbdist``'s public calls need from an engine: nbdist's own
(`nbdist.backends.local.LocalBackend`, over `nbdist.driver.runtime`'s client and `nbdist.cluster.local`) or
Ray (`nbdist.backends.ray.RayBackend`). `current` is the process's one runtime context: the
backend every public call forwards to (``current.backend``, one attribute read, so a task
submission pays nothing for the choice) and, when this process is attached to nbdist's own
engine, that engine's client (``current.client``), which refs and actor handles count
themselves against.

``init`` installs a backend, ``shutdown`` puts the local one back; a Ray worker installs its
worker-mode backend when it starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:
    from nbdist.driver.actor import ActorClass, ActorHandle
    from nbdist.driver.context import ContextNames
    from nbdist.driver.remote_function import RemoteFunction
    from nbdist.driver.runtime import CoreClient
    from nbdist.objects.refs import ObjectRef


class Backend(Protocol):
    """What the public API needs from an engine (one instance per process)."""

    driver: bool  # this process drives the session (a Ray worker's backend does not)
    info: dict[str, Any]  # what init() returned

    def is_initialized(self) -> bool: ...

    def shutdown(self) -> None: ...

    def submit_task(self, rf: RemoteFunction, args: Sequence[Any],
                    kwargs: dict[str, Any]) -> Any: ...

    def create_actor(self, ac: ActorClass, args: Sequence[Any],
                     kwargs: dict[str, Any]) -> ActorHandle: ...

    def call_method(self, handle: ActorHandle, method: str, nret: int, task_name: str,
                    args: Sequence[Any], kwargs: dict[str, Any]) -> Any: ...

    def kill(self, handle: ActorHandle, no_restart: bool) -> None: ...

    def get_actor(self, name: str, namespace: str | None) -> ActorHandle: ...

    def list_named_actors(self) -> list[dict[str, str]]: ...

    def get(self, refs: list[ObjectRef], timeout: float | None) -> list[Any]: ...

    def put(self, value: Any) -> ObjectRef: ...

    def wait(self, refs: list[ObjectRef], num_returns: int, timeout: float | None,
             fetch_local: bool) -> tuple[list[ObjectRef], list[ObjectRef]]: ...

    def cancel(self, ref: ObjectRef, force: bool, recursive: bool) -> None: ...

    def cancel_submitted(self, tag: str, force: bool) -> int: ...

    def nodes(self) -> list[dict[str, Any]]: ...

    def cluster_resources(self) -> dict[str, float]: ...

    def available_resources(self) -> dict[str, float]: ...

    def runtime_context(self) -> ContextNames: ...


class Current:
    """The process's runtime context: its backend and, on nbdist's engine, its client."""

    __slots__ = ("backend", "client")

    def __init__(self) -> None:
        self.backend: Backend = cast("Backend", _Unset())
        self.client: CoreClient | None = None


class _Unset:
    """The backend before ``nbdist.driver.api`` installs the local one (importing ``nbdist`` does)."""

    driver = False
    info: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("nbdist's public API is not loaded: import nbdist first.")


current = Current()


def current_backend() -> Backend:
    return current.backend


def set_backend(backend: Backend) -> None:
    current.backend = backend

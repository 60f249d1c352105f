"""nbdist's ObjectRef and ActorHandle types over Ray's.

`ObjectRef` here is a subclass of `nbdist.ObjectRef` holding a ``ray.ObjectRef``, and named
like it, so user code sees the same type name as on nbdist's engine and on Ray itself
(``type(ref).__name__ == "ObjectRef"``), wherever the ref turns up: returned by ``.remote()``,
or nested in a list or dict that a task returned or received. `RayActorHandle` is an
`nbdist.ActorHandle` holding a Ray actor handle (its methods submit through the backend
seam like the engine's: `RayBackend.call_method`). Being the engine's own types, they pass the
public API's type checks and the notebook layer's display rules unchanged. Ray counts the
references: a ref keeps its Ray ref alive and nothing more, so these objects skip the
engine's reference bookkeeping (``__init__``/``__del__`` of the base classes).

Both pickle to their Ray counterpart, so a ref or handle inside a task's arguments or return
value travels through Ray's serializer and Ray tracks the borrow.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

from nbdist.backends.ray.errors import translate
from nbdist.backends.ray.worker import direct_method
from nbdist.driver.actor import ActorHandle
from nbdist.objects.refs import ObjectRef as EngineRef


class ObjectRef(EngineRef):
    """An ObjectRef whose value lives in Ray's object store (``ray_ref``)."""

    __slots__ = ("ray_ref",)

    def __init__(self, ray_ref: Any) -> None:
        self.ray_ref = ray_ref
        self.id = int.from_bytes(ray_ref.binary(), "big")

    def __del__(self) -> None:
        return None

    def __reduce__(self) -> Any:
        return (ObjectRef, (self.ray_ref,))

    def hex(self) -> str:
        return str(self.ray_ref.hex())

    def binary(self) -> bytes:
        return bytes(self.ray_ref.binary())

    def task_hex(self) -> str:
        return str(self.ray_ref.task_id().hex())

    def future(self) -> Any:
        """A concurrent.futures.Future resolved with the value (or its nbdist error)."""
        out: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def done(fut: concurrent.futures.Future[Any]) -> None:
            exc = fut.exception()
            if exc is not None:
                out.set_exception(translate(exc))
            else:
                out.set_result(fut.result())

        self.ray_ref.future().add_done_callback(done)
        return out


def wrap(value: Any) -> Any:
    """ObjectRef(s) for what a Ray ``.remote()`` returned (a ref, a list of refs, or None)."""
    if value is None:
        return None
    if isinstance(value, list):
        return [ObjectRef(r) for r in value]
    return ObjectRef(value)


class RayActorHandle(ActorHandle):
    """A handle to an actor running on Ray; pickles, so tasks and actors can use it."""

    def __init__(self, ray_handle: Any, class_name: str,
                 methods: dict[str, Any]) -> None:
        self.ray_handle = ray_handle
        # Ray's handle exposes its id only under this name.
        self._actor_id = ray_handle._actor_id.hex()
        self._class_name = class_name
        self._methods = methods
        self._calls: dict[tuple[str, Any, str, str], tuple[Any, bool]] = {}

    def __del__(self) -> None:
        return None

    def __reduce__(self) -> Any:
        return (RayActorHandle, (self.ray_handle, self._class_name, self._methods))

    def __repr__(self) -> str:
        return f"Actor({self._class_name}, {self._actor_id})"

    def _default_returns(self, method: str) -> Any:
        info = (self._methods or {}).get(method)
        return info[0] if info else 1

    def ray_call(self, method: str, nret: Any, task_name: str,
                 group: str = "") -> tuple[Any, bool]:
        """(the Ray method object that runs calls of ``method`` with these options, whether
        it is the host's own method for it: else ``nbdist_call``, given the name), cached."""
        key = (method, nret, task_name, group)
        found = self._calls.get(key)
        if found is None:
            # Ray's own actors answer __ray_ready__ themselves.
            direct = direct_method(method) or method == "__ray_ready__"
            call = getattr(self.ray_handle, method if direct else "nbdist_call")
            options: dict[str, Any] = {}
            if isinstance(nret, tuple):  # ("streaming", backpressure)
                options["num_returns"] = nret[0]
                options["_generator_backpressure_num_objects"] = nret[1]
            elif nret == "dynamic":
                pass  # the host's method returns nbdist's DynamicObjectRefGenerator
            elif nret != 1 or self._default_returns(method) != 1:
                # Also 1 said outright for a generator method (Ray's default there: a stream).
                options["num_returns"] = nret
            if group:
                options["concurrency_group"] = group
            if task_name != f"{self._class_name}.{method}" or not direct:
                options["name"] = task_name
            found = self._calls[key] = (call.options(**options) if options else call, direct)
        return found

"""Object refs: the handle a user holds to a value in the cluster (layer L2).

A ref counts as a hold of its process's `runtime.CoreClient` (``backend.current.client``)
from creation to ``__del__`` (the node learns of the 0 -> 1 and 1 -> 0 changes, see `runtime`). Pickling one records its
id in the serialization context, so whatever contains it keeps it alive, and tells a driver's
direct calls that it escapes (`direct.DirectCalls.escape`): another process may now ask the
node for it. Pickled outside a serialization context (``pickle.dumps`` by user code), a ref
pins its object for the life of the process, as Ray's own ``ray.cloudpickle`` does.
"""

from __future__ import annotations

import threading
import types
from typing import Any

from nbdist.backends.base import current
from nbdist.ids import hex_id
from nbdist.wire import serialization

MAX_ID = 1 << 72  # client_no (node index, local number) << CLIENT_SHIFT | sequence


def _id_from(value: object) -> int:
    """The id of ``ObjectRef(value)`` made by user code: from `ObjectRef.binary` or the bytes
    of `ObjectRef.hex`; anything else fails here, in the caller, never in the node."""
    if isinstance(value, (bytes, bytearray)) and 0 < len(value) <= 16:
        oid = int.from_bytes(value, "big")
        if 0 < oid < MAX_ID:
            return oid
        raise ValueError(f"ObjectRef({bytes(value).hex()!r}): not the id of an nbdist object "
                         "(ids come from ObjectRef.binary() or bytes.fromhex(ref.hex())).")
    if type(value) is int:
        raise ValueError(f"ObjectRef({value}): not the id of an nbdist object.")
    if isinstance(value, (bytes, bytearray)):
        raise ValueError(f"ObjectRef() takes the bytes of an object id (at most 16, from "
                         f"ObjectRef.binary()), not {len(value)} bytes.")
    raise TypeError(f"ObjectRef() takes the bytes of an object id (ObjectRef.binary()), not "
                    f"{type(value).__name__}.")


class ObjectRef:
    """A reference to a value in the cluster (possibly not computed yet)."""

    __slots__ = ("id", "__weakref__")
    # ObjectRef[int] in type hints, as Ray's ray.types.ObjectRef.
    def __class_getitem__(cls, item: Any) -> types.GenericAlias:
        return types.GenericAlias(cls, item)

    def __init__(self, oid: int | bytes, _add: bool = True) -> None:
        if type(oid) is not int or not 0 < oid < MAX_ID:
            oid = _id_from(oid)
        self.id = oid
        client = current.client
        if client is not None:
            client._hold(oid, _add)

    def __del__(self) -> None:
        client = current.client
        if client is not None:
            client._release(self.id)

    def __reduce__(self) -> Any:
        contained = serialization.context.contained
        client = current.client
        if contained is not None:
            contained.append(self.id)
        elif client is not None:
            # Pickled outside nbdist's serializer (pickle.dumps, a file): nothing tells when
            # the bytes are read back, so the object is pinned for this process's life (Ray does
            # so under ray.cloudpickle) rather than freed under a ref unpickled later.
            client._hold(self.id, True)
        if client is not None and client.direct is not None:
            client.direct.escape(self.id)  # another process may ask the node for it
        return (_rebuild_ref, (self.id,))

    # Copies live in this process and hold the object themselves: no pin. A subclass (a
    # backend's ref) is rebuilt by its own __reduce__.
    def __copy__(self) -> ObjectRef:
        if type(self) is ObjectRef:
            return ObjectRef(self.id, True)
        rebuild, args = self.__reduce__()
        return rebuild(*args)

    def __deepcopy__(self, memo: dict[int, Any]) -> ObjectRef:
        return self.__copy__()

    def hex(self) -> str:
        return hex_id(self.id)

    def binary(self) -> bytes:
        return self.id.to_bytes(16, "big")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectRef) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"ObjectRef({self.hex()})"

    def future(self) -> Any:
        """A concurrent.futures.Future resolved with the value (or its error)."""
        import concurrent.futures

        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def resolve() -> None:
            try:
                fut.set_result(current.backend.get([self], None)[0])
            except BaseException as exc:
                fut.set_exception(exc)

        threading.Thread(target=resolve, name="nbdist-future", daemon=True).start()
        return fut

    def as_future(self) -> Any:
        """An asyncio future of this event loop's resolved with the value (or its error), as
        ``asyncio.wrap_future(ref.future())``."""
        import asyncio

        return asyncio.wrap_future(self.future())

    def __await__(self) -> Any:
        return self.as_future().__await__()


def _rebuild_ref(oid: int) -> ObjectRef:
    return ObjectRef(oid, True)

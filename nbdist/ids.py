"""Identifiers (layer L0).

Ids are plain ints, because they are hashed and pickled on every hot path. A process gets a
*client number* from its node daemon when it connects (unique in the cluster: the node's index
in the high bits); every id it makes is ``client_no << 40 | sequence``. Tasks take one id and
their return objects the ids right after it, so a task's returns are ``task_id + 1 + i``.
"""

from __future__ import annotations

import itertools
import threading

CLIENT_SHIFT = 40
NODE_SHIFT = 20


class IdSource:
    """Hands out ids for one process; thread-safe (itertools.count is atomic under the GIL)."""

    def __init__(self, client_no: int) -> None:
        self.client_no = client_no
        self._base = client_no << CLIENT_SHIFT
        self._seq = itertools.count(1)
        self._lock = threading.Lock()

    def next(self) -> int:
        return self._base | next(self._seq)

    def block(self, n: int) -> int:
        """Reserve ``n`` consecutive ids and return the first."""
        with self._lock:
            first = next(self._seq)
            for _ in range(n - 1):
                next(self._seq)
        return self._base | first


def client_no(node_index: int, local_no: int) -> int:
    return (node_index << NODE_SHIFT) | local_no


def hex_id(value: int) -> str:
    """The printable form of an id (what users see: runtime context, events, reprs)."""
    return f"{value:018x}"


def parse_hex_id(text: str) -> int:
    return int(text, 16)


class BaseID:
    """An id as the runtime context hands it out (Ray's ``JobID``, ``NodeID``, ...): ``hex()``
    is the printable form that the ``get_*_id()`` calls return."""

    __slots__ = ("_hex",)

    def __init__(self, hex_text: str) -> None:
        self._hex = hex_text

    def hex(self) -> str:
        return self._hex

    def binary(self) -> bytes:
        text = self._hex
        return bytes.fromhex(text if len(text) % 2 == 0 else "0" + text)

    def is_nil(self) -> bool:
        return not self._hex.strip("f")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._hex == self._hex

    def __hash__(self) -> int:
        return hash(self._hex)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._hex})"

    __str__ = __repr__

    def __reduce__(self) -> tuple:
        return (type(self), (self._hex,))


class JobID(BaseID):
    __slots__ = ()


class NodeID(BaseID):
    __slots__ = ()


class TaskID(BaseID):
    __slots__ = ()


class ActorID(BaseID):
    __slots__ = ()


class WorkerID(BaseID):
    __slots__ = ()

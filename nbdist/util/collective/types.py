"""Names shared by every part of ``nbdist.util.collective``: reduce operations, backends and
the error tree.

::

    CollectiveError (nbdist.exceptions.NbdistError, RuntimeError)
    ├── GroupNotInitializedError   a call names a group this process has not joined (call
    │                              init_collective_group, or create_collective_group first)
    ├── CollectiveMismatchError    the ranks called different operations, or passed tensors of
    │                              different shapes or dtypes (also a ValueError)
    ├── PeerLostError              a rank of the group died or left while this rank waited on
    │                              it; the group is unusable afterwards (destroy and re-create)
    └── CollectiveTimeoutError     a rank did not answer within the group's timeout (also a
                                   TimeoutError)
"""

from __future__ import annotations

import enum

from nbdist.exceptions import NbdistError


class ReduceOp(enum.Enum):
    """How values of the ranks combine (Ray's ``ray.util.collective.types.ReduceOp``)."""

    SUM = 0
    PRODUCT = 1
    MIN = 2
    MAX = 3


class Backend:
    """Names accepted for ``backend``: ``AUTO`` picks ``SHM`` when every rank runs on one node,
    else ``RING``. ``GLOO`` (the name Ray code uses for CPU groups) means ``AUTO``."""

    AUTO = "auto"
    SHM = "shm"
    RING = "ring"
    GLOO = "gloo"

    @classmethod
    def parse(cls, name: object) -> str:
        text = str(getattr(name, "value", name)).lower()
        if text == cls.GLOO:
            return cls.AUTO
        if text in (cls.AUTO, cls.SHM, cls.RING):
            return text
        raise ValueError(f"Unknown collective backend {name!r}: use 'auto', 'shm' (every rank "
                         f"on one node) or 'ring' (nbdist groups work on CPU tensors; there is no "
                         f"NCCL backend).")


class CollectiveError(NbdistError, RuntimeError):
    """Root of the errors of collective groups."""


class GroupNotInitializedError(CollectiveError):
    """The group is not initialized in this process."""


class CollectiveMismatchError(CollectiveError, ValueError):
    """The ranks of a group disagree on the operation, the shapes or the dtypes."""


class PeerLostError(CollectiveError):
    """A rank of the group died or left during an operation."""


class CollectiveTimeoutError(CollectiveError, TimeoutError):
    """A rank of the group did not answer within the group's timeout."""

"""``tune.with_parameters``: large objects for every trial, stored once in the object store.

The values are put into the object store when the trainable is wrapped (in the driver); each
trial fetches them by ref, so a dataset passed this way is sent once, not once per trial.
"""

from __future__ import annotations

import functools
from typing import Any

import nbdist
from nbdist.tune.trainable.trainable import Trainable


def with_parameters(trainable: Any, **kwargs: Any) -> Any:
    """``trainable`` called with ``kwargs`` besides its config: ``fn(config, **kwargs)`` or, for
    a ``Trainable`` class, ``setup(config, **kwargs)``."""
    if not nbdist.is_initialized():
        nbdist.init()
    refs = {name: nbdist.put(value) for name, value in kwargs.items()}
    if isinstance(trainable, type) and issubclass(trainable, Trainable):
        return _with_parameters_class(trainable, refs)

    @functools.wraps(trainable)
    def run(config: dict[str, Any]) -> Any:
        values = dict(zip(refs, nbdist.get(list(refs.values())), strict=True))
        return trainable(config, **values)

    del run.__wrapped__  # the wrapper's own signature (config only) is the one to call
    return run


def _with_parameters_class(cls: type[Trainable], refs: dict[str, Any]) -> type[Trainable]:
    def setup(self: Trainable, config: dict[str, Any]) -> None:
        values = dict(zip(refs, nbdist.get(list(refs.values())), strict=True))
        cls.setup(self, config, **values)

    wrapped = type(cls.__name__, (cls,), {"setup": setup})
    wrapped.__module__ = cls.__module__
    wrapped.__qualname__ = cls.__qualname__
    return wrapped

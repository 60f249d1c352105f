"""Actors: remote classes, their handles and methods (layer L3).

``ActorClass.remote(*args)`` creates an actor (a dedicated worker process running the class)
and returns an `ActorHandle`; ``handle.method.remote(*args)`` submits a call. Calls from one
process to an actor run in submission order. A handle is reference-counted like an object ref:
when no handle remains anywhere (and the actor is not ``lifetime="detached"``), the actor exits
after its pending calls. Handles pickle, so they can be passed to tasks and other actors.
"""

from __future__ import annotations

import inspect
from typing import Any

from nbdist.backends.base import current
from nbdist.driver.options import check_function_size
from nbdist.driver.remote_function import (
    ACTOR_OPTIONS,
    METHOD_OPTIONS,
    ArgCheck,
    arg_check,
    check_options,
    default_returns,
    new_function_id,
)
from nbdist.events import marks
from nbdist.wire import serialization
from nbdist.wire.serialization import check_picklable


def method(**options: Any) -> Any:
    """Decorator for actor methods: ``@nbdist.method(num_returns=2)``."""
    check_options(options, METHOD_OPTIONS, "an actor method")

    def wrap(fn: Any) -> Any:
        fn.__nbdist_method_options__ = options
        return fn

    return wrap


# Every actor answers this method with True once its constructor has run (Ray's name).
READY_METHOD = "__ray_ready__"
_NO_ARGS = ArgCheck(inspect.Signature())


# What a handle knows of each method: (num_returns, whether it is ``async def``, the check of
# its calls' arguments or None).
MethodInfo = tuple[Any, bool, "ArgCheck | None"]


def _method_table(cls: type) -> dict[str, MethodInfo]:
    table: dict[str, MethodInfo] = {}
    for name, fn in inspect.getmembers(cls, predicate=callable):
        if name.startswith("__") and name != "__call__":
            continue
        opts = getattr(fn, "__nbdist_method_options__", {})
        table[name] = (returns_with_backpressure(opts, default_returns(fn)),
                       inspect.iscoroutinefunction(fn), _method_check(cls, name, fn))
    return table


def _method_check(cls: type, name: str, fn: Any) -> ArgCheck | None:
    """The argument check of ``handle.name.remote(...)``: without ``self`` unless the
    method is a static or class method (already bound, or taking none)."""
    try:
        raw = inspect.getattr_static(cls, name)
    except AttributeError:
        return None
    plain = not isinstance(raw, (staticmethod, classmethod)) and inspect.isfunction(raw)
    return arg_check(fn, drop_first=plain)


def returns_with_backpressure(opts: dict[str, Any], default: Any) -> Any:
    """num_returns as calls carry it: ``("streaming", n)`` for a stream with backpressure."""
    nret = opts.get("num_returns", default)
    if nret == "streaming" and opts.get("_generator_backpressure_num_objects") is not None:
        from nbdist.driver.generators import backpressure_of

        return ("streaming", backpressure_of(opts))
    return nret


def _check_groups(cls: type, options: dict[str, Any]) -> None:
    groups = options.get("concurrency_groups") or {}
    for name, fn in inspect.getmembers(cls, predicate=callable):
        group = getattr(fn, "__nbdist_method_options__", {}).get("concurrency_group")
        if group is not None and group not in groups:
            raise ValueError(
                f"Method {name!r} of {cls.__name__!r} is in concurrency group {group!r}, which "
                f"the class does not declare. Declare it: @nbdist.remote(concurrency_groups="
                f"{{{group!r}: 1, ...}}).")


class ActorClass:
    """A class whose instances live in the cluster as actors."""

    def __init__(self, cls: type, options: dict[str, Any]) -> None:
        check_options(options, ACTOR_OPTIONS, f"actor class {cls.__name__!r}")
        self._cls = cls
        self._options = dict(options)
        self._fid = new_function_id()
        self._pickled: bytes | None = None
        self._methods = _method_table(cls)
        self._check = arg_check(getattr(cls, "__init__"), drop_first=True)  # noqa: B009
        self._is_async = any(
            inspect.iscoroutinefunction(m) or inspect.isasyncgenfunction(m)
            for _, m in inspect.getmembers(cls, predicate=inspect.isfunction))
        _check_groups(cls, self._options)
        self.__name__ = cls.__name__
        self.__qualname__ = cls.__qualname__
        self.__doc__ = cls.__doc__
        self.__wrapped__ = cls

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"Actor class {self.__name__!r} cannot be instantiated directly. Use "
            f"{self.__name__}.remote(...) to create an actor.")

    def options(self, **options: Any) -> ActorClass:
        check_options(options, ACTOR_OPTIONS, f"actor class {self.__name__!r}")
        clone = object.__new__(ActorClass)
        clone.__dict__.update(self.__dict__)
        clone._options = {**self._options, **options}
        return clone

    def _runs_concurrently(self) -> bool:
        """Whether its calls may run side by side (an async or threaded actor): such an actor
        runs a call whose arguments are ready before an earlier one still waiting, as Ray's."""
        opts = self._options
        return (self._is_async or (opts.get("max_concurrency") or 1) > 1
                or bool(opts.get("concurrency_groups")))

    def _pickle(self) -> bytes:
        if self._pickled is None:
            data, _ = check_picklable(self._cls, f"actor class {self.__name__!r}")
            check_function_size(data, "actor", self.__name__)
            self._pickled = data
        return self._pickled

    def remote(self, *args: Any, **kwargs: Any) -> ActorHandle:
        if self._check is not None:
            self._check.check(args, kwargs)
        mark = self._options.get("library_call")
        if mark is None:
            return current.backend.create_actor(self, args, kwargs)
        with marks.library_call(marks.as_library_call(mark)):
            return current.backend.create_actor(self, args, kwargs)

    def _remote(self, args: Any = None, kwargs: Any = None, **options: Any) -> ActorHandle:
        """Ray's lower-level form: ``cls._remote(args=[...], kwargs={...}, **options)``."""
        target = self.options(**options) if options else self
        return target.remote(*(args or ()), **(kwargs or {}))

    def bind(self, *args: Any, **kwargs: Any) -> Any:
        """A DAG node creating this actor (see `nbdist.dag`); ``node.method.bind`` binds calls."""
        from nbdist.dag.nodes import bind_class

        return bind_class(self, args, kwargs)

    def __repr__(self) -> str:
        return f"<nbdist actor class {self.__name__}>"


class ActorMethod:
    __slots__ = ("_handle", "_name", "_nret", "_task_name", "_check", "_mark")

    def __init__(self, handle: ActorHandle, name: str, nret: int,
                 check: ArgCheck | None = None) -> None:
        self._handle = handle
        self._name = name
        self._nret = nret
        self._task_name = f"{handle._class_name}.{name}"
        self._check = check
        self._mark: marks.LibraryCall | None = None  # `nbdist.events.marks`

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        if self._check is not None:
            self._check.check(args, kwargs)
        if self._mark is None:
            return current.backend.call_method(self._handle, self._name, self._nret,
                                               self._task_name, args, kwargs)
        with marks.library_call(self._mark):
            return current.backend.call_method(self._handle, self._name, self._nret,
                                               self._task_name, args, kwargs)

    def _remote(self, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        """Ray's lower-level form: ``method._remote(args=[...], kwargs={...}, **options)``."""
        target = self.options(**options) if options else self
        return target.remote(*(args or ()), **(kwargs or {}))

    def options(self, **options: Any) -> ActorMethod:
        check_options(options, METHOD_OPTIONS, f"actor method {self._name!r}")
        clone = ActorMethod(self._handle, self._name,
                            returns_with_backpressure(options, self._nret), self._check)
        if options.get("name"):
            clone._task_name = options["name"]
        clone._mark = self._mark
        if options.get("library_call") is not None:
            clone._mark = marks.as_library_call(options["library_call"])
        group = options.get("concurrency_group")
        if group is not None:
            if not isinstance(group, str) or not group or "@" in group:
                raise ValueError(f"concurrency_group must be a group's name, not {group!r}.")
            # The call names its group after the method's name; the worker splits them.
            clone._name = f"{self._name.partition('@')[0]}@{group}"
        return clone

    def bind(self, *args: Any, **kwargs: Any) -> Any:
        """A DAG node for a call of this method (see `nbdist.dag`); runs on ``execute``."""
        from nbdist.dag.nodes import bind_method

        return bind_method(self, self._name, self._nret, args, kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"Actor methods cannot be called directly. Use "
            f"actor.{self._name}.remote(...) instead.")


class ActorHandle:
    """A handle to an actor; pickles, so it can be passed to tasks and other actors."""

    def __init__(self, actor_id: int, class_name: str, methods: dict[str, MethodInfo],
                 _add: bool = True) -> None:
        self._actor_id = actor_id
        self._class_name = class_name
        self._methods = methods
        client = current.client
        # The client the hold was taken on: a handle of an earlier cluster, dropped after a new
        # init, must not release the new cluster's actor that happens to have the same id.
        self._held_on = client
        if client is not None:
            client._hold(actor_id, _add)

    def __del__(self) -> None:
        client = current.client
        held_on: object = self.__dict__.get("_held_on")
        if client is not None and held_on is client:
            client._release(self._actor_id)

    def __getattr__(self, name: str) -> Any:
        # Method objects are made on each access, not kept on the handle: a handle that
        # referred to them (and they to it) would outlive its last user until the cycle
        # collector ran, and so would the actor.
        methods = self.__dict__.get("_methods")
        if methods is not None and name in methods:
            info = methods[name]
            return ActorMethod(self, name, info[0], info[2] if len(info) > 2 else None)
        if name == READY_METHOD and methods is not None:
            return ActorMethod(self, name, 1, _NO_ARGS)
        if methods is None:
            raise AttributeError(name)
        raise AttributeError(
            f"Actor {self._class_name!r} has no method {name!r}. Methods: "
            f"{', '.join(sorted(self._methods)) or '(none)'}.")

    def __dir__(self) -> list[str]:  # tab completion shows the actor's methods
        return sorted({*super().__dir__(), *self._methods})

    def __reduce__(self) -> Any:
        # Recorded like a ref: a task carrying the handle keeps the actor alive until it ends,
        # even if the caller drops its own handle meanwhile.
        contained = serialization.context.contained
        if contained is not None:
            contained.append(self._actor_id)
        return (_rebuild_handle, (self._actor_id, self._class_name, self._methods))

    def __repr__(self) -> str:
        return f"Actor({self._class_name}, {self._actor_id:018x})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActorHandle) and other._actor_id == self._actor_id

    def __hash__(self) -> int:
        return hash(self._actor_id)


def _rebuild_handle(actor_id: int, class_name: str, methods: dict[str, MethodInfo]
                    ) -> ActorHandle:
    return ActorHandle(actor_id, class_name, methods, _add=True)

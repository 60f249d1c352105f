"""Remote functions and the options shared by tasks and actors (layer L3).

`RemoteFunction` wraps a function: ``.remote(*args)`` submits a task and returns its ref(s),
``.options(**opts)`` returns a copy with other options. The function is pickled (cloudpickle, by
value for notebook code) once, on first use, and registered with the node once per process.
Options are checked when given, so a typo fails at the line that made it, listing valid names.
"""

from __future__ import annotations

import inspect
import os
from typing import Any

from nbdist.backends.base import current
from nbdist.driver import options as compat
from nbdist.driver.strategies import strategy_of
from nbdist.events import marks

# Where work runs (nbdist.driver.groups): accepted by tasks and actors alike.
SCHEDULING_OPTIONS = frozenset({
    "scheduling_strategy", "placement_group", "placement_group_bundle_index",
    "placement_group_capture_child_tasks", "accelerator_type",
})
TASK_OPTIONS = frozenset({
    "num_cpus", "num_gpus", "resources", "num_returns", "max_retries", "retry_exceptions",
    "name", "memory", "runtime_env", "_generator_backpressure_num_objects", "library_call",
}) | compat.TASK_IGNORED | SCHEDULING_OPTIONS
ACTOR_OPTIONS = frozenset({
    "num_cpus", "num_gpus", "resources", "max_restarts", "max_task_retries", "max_concurrency",
    "name", "namespace", "lifetime", "get_if_exists", "memory", "runtime_env",
    "concurrency_groups", "library_call",
}) | compat.ACTOR_IGNORED | SCHEDULING_OPTIONS
METHOD_OPTIONS = frozenset({
    "num_returns", "name", "concurrency_group", "_generator_backpressure_num_objects",
    "library_call",
}) | compat.METHOD_IGNORED
# num_returns of a generator: its values as they come, or all of them at its end.
GENERATOR_RETURNS = ("streaming", "dynamic")

DEFAULT_MAX_RETRIES = 3

def check_options(opts: dict[str, Any], valid: frozenset[str], what: str) -> None:
    unknown = sorted(set(opts) - valid)
    if unknown:
        raise compat.unknown_options(unknown, valid, what)
    compat.check_counts(opts)
    compat.check_compat(opts, what)
    if opts.get("library_call") is not None:  # nbdist's libraries mark their own calls
        marks.as_library_call(opts["library_call"])
    for key in ("num_cpus", "num_gpus", "memory"):
        value = opts.get(key)
        if value is not None and (not isinstance(value, (int, float)) or value < 0):
            raise ValueError(f"{key} must be a non-negative number, not {value!r}.")
    res = opts.get("resources")
    if res is not None:
        if not isinstance(res, dict) or not all(
                isinstance(k, str) and isinstance(v, (int, float)) and v >= 0
                for k, v in res.items()):
            raise ValueError("resources must be a dict of name -> non-negative amount.")
        if {"CPU", "GPU"} & set(res):
            raise ValueError("Use num_cpus / num_gpus rather than resources={'CPU'|'GPU': ...}.")
    nret = opts.get("num_returns")
    if nret is not None and nret not in GENERATOR_RETURNS and (
            not isinstance(nret, int) or nret < 0):
        raise ValueError(f"num_returns must be a non-negative int, 'streaming' or 'dynamic', "
                         f"not {nret!r}.")
    check_concurrency_groups(opts.get("concurrency_groups"))
    lifetime = opts.get("lifetime")
    if lifetime not in (None, "detached", "non_detached"):
        raise ValueError("lifetime must be None, 'detached' or 'non_detached'.")


def check_concurrency_groups(groups: Any) -> None:
    if groups is None:
        return
    if not isinstance(groups, dict) or not all(
            isinstance(k, str) and k and "@" not in k and isinstance(v, int) and v > 0
            for k, v in groups.items()):
        raise ValueError("concurrency_groups must be a dict of group name -> max concurrency "
                         "(a positive int), e.g. {'io': 2, 'compute': 4}.")


def default_returns(fn: Any) -> Any:
    """Ray's default num_returns: a generator function streams its values."""
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        return "streaming"
    return 1


def resource_shape(opts: dict[str, Any], default_cpus: float) -> tuple[tuple[str, float], ...]:
    cpus = opts.get("num_cpus")
    shape: dict[str, float] = {}
    cpus = default_cpus if cpus is None else float(cpus)
    if cpus:
        shape["CPU"] = cpus
    if opts.get("num_gpus"):
        shape["GPU"] = float(opts["num_gpus"])
    if opts.get("memory"):
        shape["memory"] = float(opts["memory"])
    for k, v in (opts.get("resources") or {}).items():
        if v:
            shape[k] = float(v)
    return tuple(sorted(shape.items()))


def retry_policy(value: Any) -> Any:
    if value is None or value is False:
        return False
    if value is True:
        return True
    if isinstance(value, (list, tuple)) and all(isinstance(t, type) and
                                                issubclass(t, BaseException) for t in value):
        return tuple(t.__name__ for t in value)
    raise ValueError("retry_exceptions must be a bool or a list of exception types.")


# Ray's words and type for ``@remote`` on an ``async def`` function.
ASYNC_FUNCTION_REFUSED = (
    "'async def' should not be used for remote tasks. You can wrap the async function with "
    "`asyncio.run(f())`. See more at:https://docs.ray.io/en/latest/ray-core/actors/"
    "async_api.html ")


class ArgCheck:
    """Whether a call's arguments fit a signature, checked at ``.remote()`` (as Ray binds
    them at submission) so a wrong call fails in the caller with Python's own TypeError.

    The signature keeps its parameters' kinds and names only (defaults become None), so it
    pickles with the handle or function that carries it. Calls with positional arguments
    only, to a function without ``*args``/``**kwargs`` or keyword-only parameters, are checked
    by counting; others go through ``Signature.bind``."""

    __slots__ = ("sig", "low", "high")

    def __init__(self, sig: inspect.Signature) -> None:
        empty = inspect.Parameter.empty
        params = [p.replace(default=None if p.default is not empty else empty, annotation=empty)
                  for p in sig.parameters.values()]
        self.sig = sig.replace(parameters=params, return_annotation=empty)
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        if all(p.kind in positional for p in params):
            self.low = sum(1 for p in params if p.default is empty)
            self.high = len(params)
        else:
            self.low, self.high = 1, 0  # never by counting

    def check(self, args: Any, kwargs: Any) -> None:
        if kwargs or not self.low <= len(args) <= self.high:
            self.sig.bind(*args, **kwargs)

    def __reduce__(self) -> Any:
        return (ArgCheck, (self.sig,))


def arg_check(fn: Any, drop_first: bool = False) -> ArgCheck | None:
    """The check for calls of ``fn`` (less its first parameter: ``self``), or None when its
    signature cannot be read (a builtin, some C callables): those are not checked."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    if drop_first:
        params = list(sig.parameters.values())
        if not params or params[0].kind not in (inspect.Parameter.POSITIONAL_ONLY,
                                                inspect.Parameter.POSITIONAL_OR_KEYWORD):
            return None
        sig = sig.replace(parameters=params[1:])
    return ArgCheck(sig)


def new_function_id() -> int:
    return int.from_bytes(os.urandom(8), "big") >> 1


def _check_generator_returns(fn: Any, options: dict[str, Any]) -> None:
    """``num_returns="streaming"`` or ``"dynamic"`` asks for a generator: refused at once for
    a function that is none, as Ray refuses it (rather than a task that fails later)."""
    nret = options.get("num_returns")
    if nret in GENERATOR_RETURNS and not (
            inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)):
        raise ValueError(
            f"num_returns='{nret}' can only be used with generator functions (functions that "
            f"use 'yield'). The decorated function is not a generator function.")


class RemoteFunction:
    """A function whose calls run as tasks in the cluster."""

    def __init__(self, fn: Any, options: dict[str, Any]) -> None:
        check_options(options, TASK_OPTIONS, f"remote function {fn.__name__!r}")
        if inspect.iscoroutinefunction(fn):
            raise ValueError(ASYNC_FUNCTION_REFUSED)
        self._function = fn
        self._check = arg_check(fn)
        self._name = getattr(fn, "__name__", "task")
        self._options = dict(options)
        self._fid = new_function_id()
        self._pickled: bytes | None = None
        self.__doc__ = fn.__doc__
        self.__name__ = self._name
        self.__qualname__ = getattr(fn, "__qualname__", self._name)
        self.__module__ = getattr(fn, "__module__", None)  # type: ignore[assignment]
        self.__wrapped__ = fn
        _check_generator_returns(fn, options)
        self._prepare()

    def _prepare(self) -> None:
        opts = self._options
        compat.check_task_memory(opts)
        self._nret = opts.get("num_returns", default_returns(self._function))
        self._shape = resource_shape(opts, 1.0)
        self._resources = None if self._shape == (("CPU", 1.0),) else self._shape
        self._strategy = strategy_of(opts)
        retries = opts.get("max_retries")
        self._retries = DEFAULT_MAX_RETRIES if retries is None else int(retries)
        if self._retries < 0:
            self._retries = 1 << 30
        self._retry_exc = retry_policy(opts.get("retry_exceptions"))
        self._task_name = opts.get("name") or self._name
        mark = opts.get("library_call")
        self._mark = None if mark is None else marks.as_library_call(mark)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"Remote function {self._name!r} cannot be called directly. Use "
            f"{self._name}.remote(...) to run it as a task (and nbdist.get() on the result), "
            f"or {self._name}.__wrapped__(...) to call the plain function locally.")

    def _pickle(self) -> bytes:
        if self._pickled is None:
            from nbdist.driver.options import check_function_size
            from nbdist.wire.serialization import check_picklable

            data, _ = check_picklable(self._function, f"remote function {self._name!r}")
            check_function_size(data, "remote function", self._name)
            self._pickled = data
        return self._pickled

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        if self._check is not None:
            self._check.check(args, kwargs)
        # The backend is read once per call: nbdist's engine or Ray, installed by init().
        if self._mark is None:
            return current.backend.submit_task(self, args, kwargs)
        with marks.library_call(self._mark):
            return current.backend.submit_task(self, args, kwargs)

    def _remote(self, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        """Ray's lower-level form: ``f._remote(args=[...], kwargs={...}, **options)``."""
        target = self.options(**options) if options else self
        return target.remote(*(args or ()), **(kwargs or {}))

    def options(self, **options: Any) -> RemoteFunction:
        check_options(options, TASK_OPTIONS, f"remote function {self._name!r}")
        _check_generator_returns(self._function, options)
        clone = object.__new__(RemoteFunction)
        clone.__dict__.update(self.__dict__)
        clone._options = {**self._options, **options}
        clone._prepare()
        return clone

    def bind(self, *args: Any, **kwargs: Any) -> Any:
        """A DAG node for a call of this function (see `nbdist.dag`); runs on ``execute``."""
        from nbdist.dag.nodes import bind_function

        return bind_function(self, args, kwargs)

    def __repr__(self) -> str:
        return f"<nbdist remote function {self._name}>"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_pickled"] = None
        return state

"""Ray's option names that nbdist accepts without acting on them, and the checks they get.

Scripts written for Ray pass options that tune Ray's own machinery: whether task events are
recorded for its dashboard (``enable_task_events``), labels and metadata for its tooling
(``_labels``, ``_metadata``), limits nbdist has no counterpart of (``max_calls``,
``max_pending_calls``). What a program computes does not depend on them, so they are accepted
and type-checked as Ray checks them, then left unused. Options whose absence would change what
a program does (``label_selector`` with a selector no node can match) fail with a message that
says so. A name that is no option at all fails where it was written, with the closest valid
names (a typo is the usual cause).

The Ray backend hands the same options to Ray (`RAY_TASK` / `RAY_ACTOR`), where they mean what
Ray documents.
"""

from __future__ import annotations

import difflib
import logging
import os
from typing import Any

from nbdist.driver import runtime_env

log = logging.getLogger(__name__)

# A pickled function or actor class over this many bytes is refused at .remote() (Ray's limit,
# read from the same environment variable); over the lower one it is shipped with a warning.
FUNCTION_SIZE_WARN = 10**7
FUNCTION_SIZE_ERROR = int(os.environ.get("FUNCTION_SIZE_ERROR_THRESHOLD", 10**8))


def check_function_size(data: bytes, kind: str, name: str) -> None:
    """Refuse (ValueError, as Ray) a function or class whose pickle is over Ray's limit: it
    almost always captured a large object by accident, which every worker would load."""
    mib = len(data) // 2**20
    tip = ("Check that its definition is not implicitly capturing a large array or other "
           "object in scope. Tip: use nbdist.put() to put large objects in the object store "
           "and pass the ref instead.")
    if len(data) >= FUNCTION_SIZE_ERROR:
        raise ValueError(f"The {kind} {name} is too large ({mib} MiB > "
                         f"FUNCTION_SIZE_ERROR_THRESHOLD={FUNCTION_SIZE_ERROR // 2**20} MiB). "
                         + tip)
    if len(data) > FUNCTION_SIZE_WARN:
        log.warning("The %s %s is very large (%d MiB). %s", kind, name, mib, tip)


TASK_IGNORED = frozenset({
    "enable_task_events", "_metadata", "_labels", "max_calls", "object_store_memory",
    "label_selector", "fallback_strategy",
})
ACTOR_IGNORED = frozenset({
    "enable_task_events", "_metadata", "_labels", "object_store_memory", "label_selector",
    "fallback_strategy", "max_pending_calls", "allow_out_of_order_execution",
    "enable_tensor_transport",
})
METHOD_IGNORED = frozenset({"enable_task_events", "tensor_transport"})

# Options nbdist's Ray backend passes on to Ray unchanged.
RAY_TASK = ("enable_task_events", "_metadata", "_labels", "max_calls", "label_selector",
            "fallback_strategy", "runtime_env")
RAY_ACTOR = ("enable_task_events", "_metadata", "_labels", "label_selector",
             "fallback_strategy", "max_pending_calls", "allow_out_of_order_execution",
             "runtime_env")

_TYPES: dict[str, tuple[type, ...]] = {
    "enable_task_events": (bool,),
    "_metadata": (dict, type(None)),
    "_labels": (dict, type(None)),
    "max_calls": (int, type(None)),
    "object_store_memory": (int, type(None)),
    "label_selector": (dict, type(None)),
    "fallback_strategy": (list, type(None)),
    "max_pending_calls": (int, type(None)),
    "allow_out_of_order_execution": (bool,),
    "enable_tensor_transport": (bool,),
    "tensor_transport": (str, type(None)),
    "runtime_env": (dict, type(None)),
    "name": (str, type(None)),
    "namespace": (str, type(None)),
}


# Ray's counts: (option, whether -1 means "no limit").
_COUNTS = {"max_retries": True, "max_restarts": True, "max_task_retries": True,
           "max_pending_calls": True, "max_calls": False, "max_concurrency": False,
           "object_store_memory": False}
_RESOURCES = ("num_cpus", "num_gpus", "memory")


def check_counts(opts: dict[str, Any]) -> None:
    """Ray's type and value rules for counts, resource amounts and num_returns, in its words."""
    for key, infinite in _COUNTS.items():
        if key not in opts:
            continue
        value = opts[key]
        _check_type(key, value, (int, type(None)))
        if value is not None and value < (-1 if infinite else 0):
            raise ValueError(
                f"The keyword '{key}' only accepts None, 0, -1 or a positive integer, where -1 "
                "represents infinity." if infinite else
                f"The keyword '{key}' only accepts None, 0 or a positive integer.")
    if "num_returns" in opts:
        value = opts["num_returns"]
        _check_type("num_returns", value, (int, str, type(None)))
        if value not in (None, "dynamic", "streaming") and (isinstance(value, str) or value < 0):
            raise ValueError("The keyword 'num_returns' only accepts None, a non-negative "
                             "integer, 'streaming' (for generators), or 'dynamic'.")
    for key in _RESOURCES:
        if key in opts:
            _check_type(key, opts[key], (float, int, type(None)))
            _check_amount(key, opts[key])
    for name, amount in (opts.get("resources") or {}).items():
        _check_amount(name, amount)


def _check_type(key: str, value: Any, types: tuple[type, ...]) -> None:
    if not isinstance(value, types):
        raise TypeError(f"The type of keyword '{key}' must be {types}, but received type "
                        f"{type(value)}")


def _check_amount(name: str, amount: Any) -> None:
    if amount is None or not isinstance(amount, (int, float)):
        return
    if amount < 0:
        raise ValueError(f"The quantity of resource {name} cannot be negative")
    if isinstance(amount, float) and amount != 0.0 and int(amount * 10000) == 0:
        raise ValueError(f"The precision of the fractional quantity of resource {name} "
                         "cannot go beyond 0.0001")


def unknown_options(unknown: list[str], valid: frozenset[str], what: str) -> ValueError:
    """The error for option names that are no option of ``what``, with likely intended ones."""
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, sorted(valid), n=2, cutoff=0.6)
        if close:
            hints.append(f"{name!r}: did you mean {' or '.join(map(repr, close))}?")
    hint = (" " + " ".join(hints)) if hints else ""
    return ValueError(
        f"Unknown option(s) {', '.join(map(repr, unknown))} for {what}.{hint} Valid options: "
        f"{', '.join(sorted(valid))}.")


def check_compat(opts: dict[str, Any], what: str) -> None:
    """Type and value checks of the options in this module, worded as Ray words them."""
    for key, types in _TYPES.items():
        if key in opts and not isinstance(opts[key], types):
            names = " or ".join(t.__name__ for t in types)
            raise TypeError(f"The type of option {key!r} of {what} must be {names}, not "
                            f"{type(opts[key]).__name__}.")
    for key in ("max_calls", "object_store_memory"):
        value = opts.get(key)
        if value is not None and value < 0:
            raise ValueError(f"The option {key!r} only accepts None, 0 or a positive integer.")
    if opts.get("max_pending_calls") is not None and opts["max_pending_calls"] < -1:
        raise ValueError("The option 'max_pending_calls' only accepts -1 (no limit), 0 or a "
                         "positive integer.")
    runtime_env.check(opts.get("runtime_env"), what)
    selector = opts.get("label_selector")
    if selector:
        raise ValueError(
            f"label_selector={selector!r} on {what}: nbdist's nodes carry no labels, so no node "
            "could match it. Choose nodes with resources={...} (give nodes custom resources "
            "with `nbdist start --resources`) or NodeAffinitySchedulingStrategy.")
    for key in ("_metadata", "_labels"):
        value = opts.get(key)
        if value and not all(isinstance(k, str) for k in value):
            raise ValueError(f"The keys of option {key!r} must be strings.")


def check_task_memory(opts: dict[str, Any]) -> None:
    """Ray refuses ``object_store_memory`` on tasks (it reserves nothing there)."""
    if opts.get("object_store_memory") is not None:
        raise ValueError("Setting 'object_store_memory' is not implemented for tasks.")

"""A picklable snapshot of a task's traceback, and real frames rebuilt from it (layer L2).

Post-mortem debugging on the driver needs frames: pdb reads each frame's code position,
globals and locals. Frames cannot travel, so a failing task's worker takes a `snapshot` of the
frames of its own code (not the engine's): for each, file, line, function name, the source
lines when the file is readable there, and each local as ``(pickled bytes or None, repr)``:
pickled one by one (values over `MAX_VALUE_BYTES` and unpicklable ones keep their repr only),
so a value the driver cannot unpickle costs that value, never the error itself.

What a failing task pays is bounded, whatever its locals hold: a repr is `reprlib`'s (a long
list or dict costs its first items, not all of them), a pickle stops as soon as it passes
`MAX_VALUE_BYTES` (a dict whose shallow size is small but whose values are large stops there,
it is not pickled whole and then dropped), and all values of one snapshot share
`MAX_SNAPSHOT_BYTES` (past it, locals keep their repr only). A file's source travels once per
snapshot (on its first frame) and only for files outside the Python installation (the driver
reads the standard library's and site-packages' own files itself).

`rebuild` turns a snapshot back into a chain of real traceback objects on the driver: each
frame is a tiny piece of code compiled under the task's file name and line number, run with
the snapshot's locals as its namespace, raising at that line. pdb (``%debug``, post_mortem)
then lists the task's source, prints its locals and moves ``u``/``d`` among its frames. The
source lines go into ``linecache`` when this machine cannot read the file.
"""

from __future__ import annotations

import linecache
import os
import pickle
import reprlib
import sys
from collections.abc import Callable
from types import TracebackType
from typing import Any

import cloudpickle

MAX_VALUE_BYTES = 1 << 20
MAX_SNAPSHOT_BYTES = 4 << 20  # the pickled locals of all frames of one snapshot together
MAX_SOURCE_BYTES = 1 << 20
MAX_REPR_CHARS = 2000
ATTRIBUTE = "__nbdist_frames__"  # the snapshot's place on the task's exception

Frame = dict[str, Any]


class RemoteRepr:
    """A local that could not travel: shown as the task's repr of it."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


_repr = reprlib.Repr()
_repr.maxlevel, _repr.maxstring, _repr.maxother = 4, MAX_REPR_CHARS, MAX_REPR_CHARS
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxdict = _repr.maxdeque = 50
_INSTALLED = tuple(sorted({os.path.join(p, "") for p in (sys.prefix, sys.base_prefix,
                                                         sys.exec_prefix)}))


class _Full(Exception):
    """A pickle grew past its allowance: the value keeps its repr only."""


class _Bounded:
    """A file for the pickler that refuses to grow past ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[bytes] = []
        self.size = 0

    def write(self, data: Any) -> int:
        n = len(data)
        self.size += n
        if self.size > self.limit:
            raise _Full
        self.parts.append(bytes(data))
        return n


_SCALARS = (int, float, bool, complex, type(None))


def _pack(value: Any, budget: int = MAX_VALUE_BYTES) -> tuple[bytes | None, str]:
    kind = type(value)
    if kind in _SCALARS or (kind in (str, bytes) and len(value) <= MAX_REPR_CHARS):
        return pickle.dumps(value, protocol=5), repr(value)  # most locals: the short way
    try:
        text = _repr.repr(value)[:MAX_REPR_CHARS]
    except Exception:
        text = f"<{type(value).__name__} (repr failed)>"
    limit = min(MAX_VALUE_BYTES, budget)
    if sys.getsizeof(value) > limit or getattr(value, "nbytes", 0) > limit:
        return None, text
    out = _Bounded(limit)
    try:
        cloudpickle.CloudPickler(out, protocol=5).dump(value)
    except Exception:  # _Full, or what does not pickle
        return None, text
    return b"".join(out.parts), text


def _source(filename: str) -> list[str]:
    if filename.startswith(_INSTALLED):
        return []  # the driver's own copy is the same file
    lines = linecache.getlines(filename)
    return lines if sum(map(len, lines)) <= MAX_SOURCE_BYTES else []


def snapshot(tb: TracebackType | None, engine: Callable[[str], bool]) -> list[Frame]:
    """The frames of ``tb`` whose file is not the engine's (``engine(filename)``)."""
    frames: list[Frame] = []
    budget = MAX_SNAPSHOT_BYTES
    sources: set[str] = set()
    while tb is not None:
        frame = tb.tb_frame
        filename = frame.f_code.co_filename
        if not engine(filename):
            packed = {}
            for k, v in frame.f_locals.items():
                packed[k] = _pack(v, budget)
                budget -= len(packed[k][0] or b"")
            frames.append({
                "file": filename, "line": tb.tb_lineno, "name": frame.f_code.co_name,
                "locals": packed,
                "source": [] if filename in sources else _source(filename)})
            sources.add(filename)
        tb = tb.tb_next
    return frames


def attach(exc: BaseException, engine: Callable[[str], bool]) -> None:
    """Put the snapshot of ``exc``'s traceback on it (it travels with the exception)."""
    try:
        setattr(exc, ATTRIBUTE, snapshot(exc.__traceback__, engine))
    except Exception:
        pass  # an exception that takes no attributes fails without its frames


def find(error: BaseException | None) -> list[Frame] | None:
    """The snapshot carried by ``error`` (a task's error on the driver) or its cause."""
    for candidate in (error, getattr(error, "cause", None)):
        frames = getattr(candidate, ATTRIBUTE, None)
        if frames:
            return list(frames)
    return None


def _unpack(packed: Any) -> Any:
    data, text = packed
    if data is not None:
        try:
            return pickle.loads(data)
        except Exception:
            pass
    return RemoteRepr(text)


class _Raise(Exception):
    pass


def rebuild(frames: list[Frame]) -> TracebackType | None:
    """Real traceback objects standing for ``frames``, outermost first."""
    head: TracebackType | None = None
    last: TracebackType | None = None
    for info in frames:
        filename, line = str(info["file"]), max(1, int(info["line"]))
        if info.get("source") and not linecache.getlines(filename):
            lines = [str(x) for x in info["source"]]
            linecache.cache[filename] = (sum(map(len, lines)), None, lines, filename)
        namespace = {k: _unpack(v) for k, v in dict(info["locals"]).items()}
        namespace["__nbdist_raise__"] = _Raise
        code = compile("\n" * (line - 1) + "raise __nbdist_raise__", filename, "exec")
        code = code.replace(co_name=str(info["name"]))
        try:
            exec(code, namespace)
        except _Raise as exc:
            tb = exc.__traceback__
            entry = tb.tb_next if tb is not None else None
        else:
            entry = None
        namespace.pop("__nbdist_raise__", None)
        if entry is None:
            continue
        entry.tb_next = None
        if last is None:
            head = entry
        else:
            last.tb_next = entry
        last = entry
    return head

"""Serialization of values, arguments and errors (layer L1).

Contract: a value is pickled once with cloudpickle at protocol 5; buffers that support
out-of-band pickling (numpy arrays, Arrow buffers, PickleBuffer) are kept out of the pickle
stream. The result is a *blob* in one of these layouts (first byte is the tag):

    b"P" + pickle                           no out-of-band buffers
    b"B" + header + pickle + buffers        header: u32 count, u64 pickle length, then per
                                            buffer u64 offset and u64 length; buffers start at
                                            64-byte aligned offsets (from the blob start)
    b"E" + pickle(TaskErrorInfo)            the task raised; see `error_blob`
    b"S" + pickle(exception)                an nbdist error raised by the system (cancelled,
                                            worker crashed, actor died ...)

The same bytes are either sent inline or written as a shared-memory file (see ``store``), and
`loads` reads either: given a read-only memoryview over a mapping, out-of-band buffers become
zero-copy, read-only numpy arrays and Arrow buffers.

Refs inside a value are recorded while pickling (`SerializationContext.contained`) so the
cluster keeps them alive as long as the value that contains them.
"""

from __future__ import annotations

import io
import marshal
import pickle
import struct
import threading
import traceback
import types
from collections import ChainMap
from collections.abc import Callable, Sequence
from typing import Any

import cloudpickle

from nbdist.exceptions import SerializationError, TaskError

_HEADER = struct.Struct("<IQ")
_ENTRY = struct.Struct("<QQ")
ALIGN = 64

TAG_PICKLE = 0x50  # "P"
TAG_BUFFERS = 0x42  # "B"
TAG_ERROR = 0x45  # "E"
TAG_SYSTEM = 0x53  # "S"


def _load_code(data: bytes) -> types.CodeType:
    code = marshal.loads(data)
    assert isinstance(code, types.CodeType)
    return code


def _reduce_code(code: types.CodeType) -> tuple[Any, tuple[bytes]]:
    # Code objects travel as marshal data, which keeps ``co_filename``: remote tracebacks then
    # name the user's file or notebook cell and its lines. (cloudpickle 3.1.3 and later write
    # "<dynamic-code>" there.) marshal is tied to the Python version, as bytecode already is.
    return _load_code, (marshal.dumps(code),)


class _Pickler(cloudpickle.Pickler):
    """cloudpickle's pickler, with code objects that keep the file they came from."""

    dispatch_table = ChainMap({types.CodeType: _reduce_code},
                              cloudpickle.Pickler.dispatch_table)


def pickle_dumps(value: Any, buffer_callback: Callable[[pickle.PickleBuffer], Any] | None = None
                 ) -> bytes:
    """``cloudpickle.dumps`` at protocol 5, keeping the file names of functions' code."""
    with io.BytesIO() as file:
        _Pickler(file, protocol=5, buffer_callback=buffer_callback).dump(value)
        return file.getvalue()


class SerializationContext(threading.local):
    """Per-thread state while pickling: ids of refs met inside the value."""

    def __init__(self) -> None:
        self.contained: list[int] | None = None


context = SerializationContext()


# Values made only of these (at most two levels of small tuples, lists and str-keyed dicts)
# pickle the same with the C pickler as with cloudpickle, without building a cloudpickle
# Pickler: most results (None, numbers, short strings) and many argument lists.
_PLAIN_TYPES = {type(None), bool, int, float, complex, str, bytes}


def register_plain(kind: type) -> None:
    """Let values of ``kind`` (a module-level class that pickles by value and holds no refs)
    take the C pickler's path."""
    _PLAIN_TYPES.add(kind)


def _plain(value: Any, depth: int = 2) -> bool:
    kind = type(value)
    if kind in _PLAIN_TYPES:
        return True
    if not depth:
        return False
    if (kind is tuple or kind is list) and len(value) <= 16:
        return all(_plain(v, depth - 1) for v in value)
    if kind is dict and len(value) <= 16:
        return all(type(k) is str and _plain(v, depth - 1) for k, v in value.items())
    return False


def dumps(value: Any) -> tuple[list[Any], int, tuple[int, ...]]:
    """Serialize ``value``; returns (parts, total size, contained ref ids).

    ``parts`` joined are the blob; kept apart so large buffers are written to shared memory
    without an extra copy (``os.writev``)."""
    if _plain(value):
        data = pickle.dumps(value, protocol=5)
        return [b"P", data], 1 + len(data), ()
    buffers: list[pickle.PickleBuffer] = []
    outer = context.contained
    context.contained = []
    try:
        data = pickle_dumps(value, buffer_callback=buffers.append)
        contained = tuple(context.contained)
    finally:
        context.contained = outer
    if not buffers:
        return [b"P", data], 1 + len(data), contained
    raws = [b.raw() for b in buffers]
    header_len = 1 + _HEADER.size + _ENTRY.size * len(raws)
    parts: list[Any] = [b"B", None, data]
    entries = []
    offset = header_len + len(data)
    for raw in raws:
        pad = (-offset) % ALIGN
        if pad:
            parts.append(b"\0" * pad)
            offset += pad
        entries.append(_ENTRY.pack(offset, raw.nbytes))
        parts.append(raw)
        offset += raw.nbytes
    parts[1] = _HEADER.pack(len(raws), len(data)) + b"".join(entries)
    return parts, offset, contained


def join(parts: list[Any]) -> bytes:
    return b"".join(parts)


def dumps_bytes(value: Any) -> tuple[bytes, tuple[int, ...]]:
    parts, _, contained = dumps(value)
    return join(parts), contained


def loads(blob: bytes | memoryview) -> Any:
    """Deserialize a blob. Raises the stored exception for error blobs (``E``/``S``)."""
    tag = blob[0]
    if tag == TAG_PICKLE:
        return pickle.loads(memoryview(blob)[1:])
    if tag == TAG_BUFFERS:
        view = memoryview(blob)
        count, plen = _HEADER.unpack_from(view, 1)
        pos = 1 + _HEADER.size
        buffers = []
        for _ in range(count):
            off, length = _ENTRY.unpack_from(view, pos)
            pos += _ENTRY.size
            buffers.append(view[off : off + length])
        return pickle.loads(view[pos : pos + plen], buffers=buffers)
    raise error_from_blob(blob)


def is_error(blob: bytes | memoryview) -> bool:
    return blob[0] in (TAG_ERROR, TAG_SYSTEM)


def error_from_blob(blob: bytes | memoryview) -> BaseException:
    tag = blob[0]
    body = memoryview(blob)[1:]
    if tag == TAG_SYSTEM:
        err = pickle.loads(body)
        assert isinstance(err, BaseException)
        return err
    if tag == TAG_ERROR:
        name, tb, cause_bytes, pid, task_id, type_name, message, _ = pickle.loads(body)
        cause: BaseException | None = None
        if cause_bytes is not None:
            try:
                cause = pickle.loads(cause_bytes)
            except Exception:
                cause = None
        if cause is None:
            tb = tb or f"{type_name}: {message}"
        return TaskError(name, tb, cause, pid, task_id).as_instanceof_cause()
    raise SerializationError(f"Unknown object blob tag {tag!r}: the object is corrupt.")


def error_blob(name: str, exc: BaseException, pid: int, task_id: str, skip: Callable[[str], bool]) -> bytes:
    """Blob for a user exception raised in a task: the exception itself (when it pickles)
    and its traceback without the engine's frames (``skip(filename)`` tells which)."""
    if isinstance(exc, TaskError):
        # A failure propagated from a dependency: keep the original.
        tb_text = exc.remote_traceback
        cause = exc.cause
        name = exc.function_name
    else:
        tb_text = format_user_traceback(exc, skip)
        cause = exc
    cause_bytes: bytes | None
    try:
        cause_bytes = pickle_dumps(cause)
        pickle.loads(cause_bytes)
    except Exception:
        cause_bytes = None
    type_name = type(cause).__name__ if cause is not None else "Error"
    message = str(cause) if cause is not None else ""
    mro = tuple(c.__name__ for c in type(cause).__mro__) if cause is not None else ()
    return b"E" + pickle.dumps(
        (name, tb_text, cause_bytes, pid, task_id, type_name, message, mro), protocol=5
    )


def error_text(blob: bytes) -> str:
    """The remote traceback of a task error blob, read without unpickling user code."""
    if blob[:1] != b"E":
        return ""
    fields = pickle.loads(memoryview(blob)[1:])
    return str(fields[1] or f"{fields[5]}: {fields[6]}")


def error_type_names(blob: bytes) -> tuple[str, ...]:
    """Class names in the MRO of a task error's cause, read without unpickling user code."""
    if blob[:1] != b"E":
        return ()
    return tuple(pickle.loads(memoryview(blob)[1:])[7])


def system_error_blob(exc: BaseException) -> bytes:
    return b"S" + pickle.dumps(exc, protocol=5)


def format_user_traceback(exc: BaseException, skip: Callable[[str], bool]) -> str:
    tb = exc.__traceback__
    frames = [f for f in traceback.extract_tb(tb) if not skip(f.filename)]
    out = io.StringIO()
    out.write("Traceback (most recent call last):\n")
    out.write("".join(traceback.format_list(frames)))
    out.write("".join(traceback.format_exception_only(type(exc), exc)))
    return out.getvalue()


def check_picklable(value: Any, what: str) -> tuple[bytes, tuple[int, ...]]:
    """Serialize ``value`` or raise SerializationError naming ``what`` and the value's type."""
    try:
        return dumps_bytes(value)
    except Exception as exc:
        from nbdist.wire.pickle_paths import describe

        where = describe(value, getattr(value, "__name__", type(value).__name__))
        raise SerializationError(
            f"Could not serialize {what} of type {type(value).__name__}: {exc}.{where} "
            "Values sent to tasks and actors must be picklable; create such objects "
            "inside the task instead, or pass what is needed to build them."
        ) from exc


def argument_error(args: Sequence[Any], kwargs: dict[str, Any], what: str,
                   exc: Exception) -> SerializationError:
    """The error for arguments that did not pickle, naming the first one that does not."""
    for i, value in enumerate(args):
        try:
            dumps(value)
        except Exception as inner:
            return SerializationError(
                f"Could not serialize argument {i} of {what} (type "
                f"{type(value).__name__}): {inner}. Arguments must be picklable: create "
                "such objects inside the task, or pass what is needed to build them.")
    for key, value in kwargs.items():
        try:
            dumps(value)
        except Exception as inner:
            return SerializationError(
                f"Could not serialize keyword argument {key!r} of {what} (type "
                f"{type(value).__name__}): {inner}. Arguments must be picklable.")
    return SerializationError(f"Could not serialize the arguments of {what}: {exc}")


def too_big_inline(value: Any, limit: int) -> bool:
    """Whether an argument is large enough to travel through the object store."""
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes > limit // 2
    if isinstance(value, (bytes, bytearray, str)):
        return len(value) > limit // 2
    try:
        return dumps(value)[1] > limit // 2
    except Exception:
        return False


def error_fields(blob: bytes | None) -> tuple[str, str, str]:
    """(error type, message, remote traceback) of a task error blob, for a TaskFailed record;
    a user's error is read without unpickling user code (the node has none of it)."""
    if not blob:
        return "Error", "", ""
    try:
        if blob[:1] == b"E":
            fields = pickle.loads(memoryview(blob)[1:])
            type_name, message = str(fields[5]), str(fields[6])
            return type_name, message, error_text(blob)[-8000:]
        err = error_from_blob(blob)
    except Exception as exc:
        return type(exc).__name__, str(exc), ""
    text = str(err)
    return type(err).__name__, text.splitlines()[0] if text else "", ""

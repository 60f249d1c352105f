"""Serialization contract: blobs round-trip, buffers come back zero-copy and read-only."""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pyarrow as pa
import pytest

from nbdist import exceptions
from nbdist.wire import serialization


def _blob(value: object) -> bytes:
    return serialization.dumps_bytes(value)[0]


def test_small_value_uses_plain_layout() -> None:
    blob = _blob({"a": [1, 2, 3]})
    assert blob[:1] == b"P"
    assert serialization.loads(blob) == {"a": [1, 2, 3]}


def test_numpy_buffers_go_out_of_band_and_come_back_read_only() -> None:
    arr = np.arange(100_000, dtype=np.float64)
    blob = _blob(arr)
    assert blob[:1] == b"B"
    out = serialization.loads(memoryview(blob))
    assert np.array_equal(out, arr)
    assert out.flags.writeable is False
    # The array is a view on the blob, not a copy of it.
    assert np.shares_memory(out, np.frombuffer(blob, dtype=np.uint8))


def test_buffers_are_aligned() -> None:
    parts, size, _ = serialization.dumps([np.ones(10), np.ones(33, dtype=np.int8), np.ones(7)])
    blob = serialization.join(parts)
    assert len(blob) == size
    out = serialization.loads(blob)
    for arr in out:
        assert arr.ctypes.data % serialization.ALIGN == np.frombuffer(
            blob, np.uint8).ctypes.data % serialization.ALIGN


def test_arrow_table_round_trip_is_zero_copy() -> None:
    table = pa.table({"x": np.arange(50_000), "y": np.arange(50_000) * 2.0})
    blob = _blob(table)
    out = serialization.loads(memoryview(blob))
    assert out.equals(table)
    buf = out.column("x").chunks[0].buffers()[1]
    base = np.frombuffer(blob, np.uint8).ctypes.data
    assert base <= buf.address < base + len(blob)


def test_task_error_blob_rebuilds_the_users_type() -> None:
    class Custom(ValueError):
        pass

    try:
        raise Custom("broken")
    except Custom as exc:
        blob = serialization.error_blob("f", exc, 123, "abc", lambda name: False)
    assert serialization.is_error(blob)
    err = serialization.error_from_blob(blob)
    assert isinstance(err, exceptions.TaskError)
    assert isinstance(err, ValueError)
    assert "broken" in str(err) and "Traceback" in str(err)
    with pytest.raises(ValueError):
        serialization.loads(blob)
    assert "Custom" in serialization.error_type_names(blob)


def test_unpicklable_cause_still_reports_type_and_message() -> None:
    class Odd(Exception):
        def __init__(self) -> None:
            super().__init__("odd one")
            self.lock = threading.Lock()

    try:
        raise Odd()
    except Odd as exc:
        blob = serialization.error_blob("g", exc, 1, "t", lambda name: False)
    err = serialization.error_from_blob(blob)
    assert isinstance(err, exceptions.TaskError)
    assert "odd one" in str(err)


def test_system_error_blob_round_trip() -> None:
    blob = serialization.system_error_blob(exceptions.WorkerCrashedError("gone"))
    err = serialization.error_from_blob(blob)
    assert isinstance(err, exceptions.WorkerCrashedError)


def test_check_picklable_names_the_type() -> None:
    with pytest.raises(exceptions.SerializationError, match="argument 0 .*lock"):
        serialization.check_picklable(threading.Lock(), "argument 0")


def test_dual_task_error_pickles() -> None:
    err = exceptions.TaskError("f", "tb", KeyError("k"), 1, "t").as_instanceof_cause()
    assert isinstance(err, KeyError)
    again = pickle.loads(pickle.dumps(err))
    assert isinstance(again, KeyError) and isinstance(again, exceptions.TaskError)


# The traceback contract: a function shipped to a worker keeps the file (or notebook cell) it was
# defined in, so a remote traceback names it and its lines. cloudpickle's own behaviour here has
# changed between releases (3.1.3 writes "<dynamic-code>"), hence the version in the messages.
_CELL = "/tmp/ipykernel_4242/123456789.py"
_SOURCE = """
def outer(x):
    inner = lambda y: y / 0
    return inner(x)
"""

_CHILD = """
import sys, traceback
from nbdist.wire import serialization
fn = serialization.loads(sys.stdin.buffer.read())
try:
    fn(1)
except ZeroDivisionError as exc:
    for frame in traceback.extract_tb(exc.__traceback__)[1:]:
        print(frame.filename, frame.lineno, frame.name)
"""


def _shipped_function() -> object:
    namespace: dict[str, object] = {"__name__": "__main__"}
    exec(compile(_SOURCE, _CELL, "exec"), namespace)
    return namespace["outer"]


def test_shipped_code_keeps_its_file_name_and_lines_in_a_child_process() -> None:
    import subprocess
    import sys

    import cloudpickle

    blob = _blob(_shipped_function())
    child = subprocess.run([sys.executable, "-c", _CHILD], input=blob, capture_output=True,
                           timeout=60, check=True)
    frames = child.stdout.decode().split("\n")
    where = f"(cloudpickle {cloudpickle.__version__})"
    assert frames[0] == f"{_CELL} 4 outer", f"outer frame lost its file or line {where}: {frames}"
    assert frames[1] == f"{_CELL} 3 <lambda>", f"nested code lost its file {where}: {frames}"


def test_error_causes_pickle_with_code_that_keeps_its_file() -> None:
    import cloudpickle

    fn = _shipped_function()
    restored = pickle.loads(serialization.pickle_dumps(fn))
    assert restored.__code__.co_filename == _CELL, (
        f"cloudpickle {cloudpickle.__version__} renamed the code's file")
    with pytest.raises(ZeroDivisionError):
        restored(1)

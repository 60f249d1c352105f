"""A task's traceback snapshot survives pickling and becomes real frames pdb can read: each
frame's locals (a value that cannot be pickled keeps its repr), line and source."""

from __future__ import annotations

import linecache
import pickle
import threading
import traceback

from nbdist.daemons import tb_snapshot


def _fails(rows: list[str]) -> None:
    lock = threading.Lock()  # does not pickle: travels as its repr
    width = len(rows[-1])
    raise ValueError(f"too wide: {width} {lock is not None}")


def test_snapshot_rebuilds_frames_with_locals_and_source() -> None:
    try:
        _fails(["ab", "abcd"])
    except ValueError as exc:
        tb_snapshot.attach(exc, lambda filename: False)  # no engine frames here
        error = pickle.loads(pickle.dumps(exc))
    frames = tb_snapshot.find(error)
    assert frames is not None and [f["name"] for f in frames][-1] == "_fails"
    tb = tb_snapshot.rebuild(frames)
    entries = list(traceback.walk_tb(tb))
    frame, line = entries[-1]
    assert frame.f_code.co_name == "_fails" and frame.f_code.co_filename == __file__
    assert frame.f_locals["width"] == 4 and frame.f_locals["rows"] == ["ab", "abcd"]
    assert "unlocked _thread.lock" in repr(frame.f_locals["lock"])
    assert "raise ValueError" in linecache.getline(__file__, line)
    assert entries[0][0].f_code.co_name == "test_snapshot_rebuilds_frames_with_locals_and_source"


def test_engine_frames_are_left_out_and_no_snapshot_means_none() -> None:
    try:
        _fails(["x"])
    except ValueError as exc:
        tb_snapshot.attach(exc, lambda filename: True)
        assert tb_snapshot.find(exc) is None
    assert tb_snapshot.find(RuntimeError("plain")) is None

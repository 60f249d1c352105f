"""A task's traceback snapshot survives pickling and becomes real frames pdb can read: each
frame's locals (a value that cannot be pickled keeps its repr), line and source."""

from __future__ import annotations

import linecache
import pickle
import sys
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


def _fails_with_large_locals(depth: int) -> None:
    if depth:
        _fails_with_large_locals(depth - 1)
    table = {k: list(range(50_000)) for k in range(40)}  # shallow size small, pickle ~10 MB
    rows = list(range(1_000_000))
    small = {"width": 3}
    raise ValueError(f"{len(table)} {len(rows)} {small}")


def test_a_snapshot_costs_a_bounded_size_whatever_the_locals_hold() -> None:
    try:
        _fails_with_large_locals(2)
    except ValueError as exc:
        frames = tb_snapshot.snapshot(exc.__traceback__, lambda filename: False)
    mine = [f for f in frames if f["name"] == "_fails_with_large_locals"]
    assert len(mine) == 3
    last = mine[-1]["locals"]
    assert last["table"][0] is None and last["rows"][0] is None  # too large: repr only
    assert last["small"][0] is not None and pickle.loads(last["small"][0]) == {"width": 3}
    assert len(last["rows"][1]) < 1000 and last["rows"][1].endswith("...]")  # first items only
    assert len(pickle.dumps(frames)) < tb_snapshot.MAX_SNAPSHOT_BYTES
    # The file's source travels once, with its first frame.
    with_source = [f for f in frames if f["file"] == __file__ and f["source"]]
    assert len(with_source) == 1
    # The standard library's files are the driver's own: no source travels for them.
    try:
        import json

        json.loads("{")
    except ValueError as exc:
        frames = tb_snapshot.snapshot(exc.__traceback__, lambda filename: False)
    assert any(f["file"] == json.__file__ for f in frames)
    assert all(not f["source"] for f in frames if f["file"].startswith(sys.prefix)
               or f["file"].startswith(sys.base_prefix))

"""Reading and writing files (local folders, hive partitions, pyarrow filesystems),
streaming_split, and a pipeline over more data than the object store holds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

import nbdist
from nbdist import data as rd

pytestmark = [pytest.mark.timeout(300)]
STORE = 64 * 1024 * 1024


@pytest.fixture(scope="module")
def small_store_cluster():
    if nbdist.is_initialized():
        nbdist.shutdown()
    nbdist.init(num_cpus=2, object_store_memory=STORE)
    rd.DataContext.get_current().enable_progress_bars = False
    yield
    nbdist.shutdown()


pytestmark.append(pytest.mark.usefixtures("small_store_cluster"))


def _frame(n: int = 300) -> pd.DataFrame:
    return pd.DataFrame({"a": np.arange(n), "b": np.arange(n) * 0.5,
                         "s": [f"r{i}" for i in range(n)]})


def test_parquet_csv_json_round_trips(tmp_path: Path) -> None:
    df = _frame()
    ds = rd.from_pandas([df.iloc[:100], df.iloc[100:]])
    for fmt in ("parquet", "csv", "json"):
        getattr(ds, f"write_{fmt}")(str(tmp_path / fmt))
        assert len(list((tmp_path / fmt).iterdir())) == 2
        back = getattr(rd, f"read_{fmt}")(str(tmp_path / fmt)).to_pandas()
        pd.testing.assert_frame_equal(back.sort_values("a").reset_index(drop=True), df,
                                      check_dtype=False)
    cols = rd.read_parquet(str(tmp_path / "parquet"), columns=["b"]).to_pandas()
    assert list(cols.columns) == ["b"] and cols["b"].sum() == df["b"].sum()


def test_partitioned_parquet_and_filesystem(tmp_path: Path) -> None:
    for part in ("x", "y"):
        (tmp_path / "t" / f"part={part}").mkdir(parents=True)
        pq.write_table(pa.table({"v": [1, 2, 3]}),
                       str(tmp_path / "t" / f"part={part}" / "f.parquet"))
    got = rd.read_parquet(str(tmp_path / "t")).to_pandas().sort_values(["part", "v"])
    assert list(got["part"]) == ["x"] * 3 + ["y"] * 3 and list(got["v"]) == [1, 2, 3] * 2
    fs = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    rd.range(50).write_parquet("viafs", filesystem=fs)
    assert rd.read_parquet("viafs", filesystem=fs).sum("id") == sum(range(50))


def test_text_numpy_binary_images(tmp_path: Path) -> None:
    (tmp_path / "txt").mkdir()
    (tmp_path / "txt" / "a.txt").write_text("one\ntwo\n\nthree\n")
    assert [r["text"] for r in rd.read_text(str(tmp_path / "txt")).take_all()] == \
        ["one", "two", "three"]
    rd.from_numpy(np.arange(12).reshape(4, 3)).write_numpy(str(tmp_path / "npy"),
                                                           column="data")
    back = rd.read_numpy(str(tmp_path / "npy")).take_batch(4)["data"]
    assert back.tolist() == np.arange(12).reshape(4, 3).tolist()
    rows = rd.read_binary_files(str(tmp_path / "txt"), include_paths=True).take_all()
    assert rows[0]["bytes"] == b"one\ntwo\n\nthree\n" and rows[0]["path"].endswith("a.txt")
    from PIL import Image

    (tmp_path / "img").mkdir()
    Image.fromarray(np.full((4, 6, 3), 200, dtype=np.uint8)).save(tmp_path / "img" / "a.png")
    img = rd.read_images(str(tmp_path / "img"), size=(2, 3)).take(1)[0]["image"]
    assert img.shape == (2, 3, 3) and int(img[0, 0, 0]) == 200


def test_streaming_split_deals_every_row_once_per_epoch() -> None:
    ds = rd.range(1003, override_num_blocks=7).map_batches(lambda b: {"id": b["id"] * 2})

    @nbdist.remote(num_cpus=0.5)
    def consume(it) -> list[list[int]]:
        return [sorted(r["id"] for r in it.iter_rows()) for _ in range(2)]

    for equal in (True, False):
        a, b = nbdist.get([consume.remote(s) for s in ds.streaming_split(2, equal=equal)])
        for epoch in range(2):
            assert not set(a[epoch]) & set(b[epoch])
            if equal:
                assert len(a[epoch]) == len(b[epoch]) == 501
            else:
                assert sorted(a[epoch] + b[epoch]) == list(range(0, 2006, 2))


def test_pipeline_larger_than_the_store_finishes() -> None:
    # 40 blocks of 4 MiB (160 MiB) through a 64 MiB store: only a few blocks are in the
    # store at a time, and the first batch comes out before the last block is made.
    rows = 40 * 256 * 1024
    made = rd.range(rows, override_num_blocks=40)
    big = made.map_batches(lambda b: {"id": b["id"], "pad": np.zeros(len(b["id"]))})
    stream = big.iter_batches(batch_size=None)
    first = next(stream)
    assert first["id"][0] == 0
    total = len(first["id"]) + sum(len(b["id"]) for b in stream)
    assert total == rows
    assert big.sum("id") == (total - 1) * total // 2

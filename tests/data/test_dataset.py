"""nbdist.data's operators on a real 2-CPU cluster, each checked against pandas computing the
same thing on the same rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import nbdist
from nbdist import data as rd

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("cluster")]


def _frame(n: int = 500) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"k": rng.integers(0, 7, n), "g": rng.choice(["a", "b", "c"], n),
                         "x": rng.normal(size=n), "y": np.arange(n, dtype=np.int64)})


def _same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True),
                                  check_dtype=False)


def test_import_paths_and_lazy_plan() -> None:
    import nbdist.data as data_module

    assert nbdist.data is data_module is rd
    ds = rd.range(100).map(lambda r: {"id": r["id"] * 2})
    assert "ReadRange" in repr(ds) and "Map" in repr(ds)
    assert ds.count() == 100  # map keeps rows: the count is known without running the map
    assert rd.range(10).filter(lambda r: r["id"] < 3).count() == 3


def test_row_and_batch_transforms_match_pandas() -> None:
    df = _frame()
    ds = rd.from_pandas([df.iloc[:200], df.iloc[200:]])
    got = (ds.map(lambda r: {**r, "z": r["x"] * 2})
             .filter(lambda r: r["k"] != 3)
             .map_batches(lambda b: b.assign(w=b["y"] + 1), batch_format="pandas",
                          batch_size=64)
             .add_column("v", lambda d: d["y"] % 5)
             .drop_columns(["g"])
             .rename_columns({"x": "xx"})
             .select_columns(["y", "xx", "z", "w", "v"])).to_pandas()
    want = df.assign(z=df["x"] * 2)[df["k"] != 3].assign(w=lambda d: d["y"] + 1,
                                                        v=lambda d: d["y"] % 5)
    _same(got, want.rename(columns={"x": "xx"})[["y", "xx", "z", "w", "v"]])
    fm = rd.from_items([1, 2, 3]).flat_map(lambda r: [r, r]).take_all()
    assert [r["item"] for r in fm] == [1, 1, 2, 2, 3, 3]
    assert ds.filter(expr="k > 4 and g == 'a'").count() == ((df.k > 4) & (df.g == "a")).sum()


def test_batch_formats_and_tensors() -> None:
    ds = rd.range(40, override_num_blocks=4)
    assert ds.map_batches(lambda t: t.append_column("two", t["id"]), batch_format="pyarrow") \
        .sum("two") == sum(range(40))
    arrays = rd.from_numpy(np.arange(24).reshape(6, 2, 2))
    batch = arrays.take_batch(6)
    assert batch["data"].shape == (6, 2, 2) and batch["data"][5, 1, 1] == 23
    tensors = rd.range_tensor(8, shape=(3,)).map_batches(lambda b: {"data": b["data"] * 2})
    assert tensors.take(2)[1]["data"].tolist() == [2, 2, 2]


class AddConstant:
    """A callable class for an actor pool: built once per actor."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.calls = 0

    def __call__(self, batch: dict) -> dict:
        self.calls += 1
        return {"id": batch["id"] + self.k, "calls": np.full(len(batch["id"]), self.calls)}


def test_actor_pool_map_batches() -> None:
    ds = rd.range(300, override_num_blocks=6).map_batches(
        AddConstant, fn_constructor_args=(1000,), concurrency=2, num_cpus=0.5)
    rows = ds.take_all()
    assert [r["id"] for r in rows] == list(range(1000, 1300))
    # Two actors took six blocks: some actor ran more than one, on the instance it built.
    assert max(r["calls"] for r in rows) >= 2
    # A pool holding every CPU (1 each, 2 actors): the maps after it, and the aggregate, run
    # on its actors rather than waiting for a CPU.
    full = rd.range(100, override_num_blocks=4).map_batches(
        AddConstant, fn_constructor_args=(1,), concurrency=2).map(lambda r: {"id": r["id"]})
    assert full.sum("id") == sum(range(1, 101))


def test_limit_take_iter_and_splits() -> None:
    ds = rd.range(1000, override_num_blocks=10)
    assert [r["id"] for r in ds.limit(15).take_all()] == list(range(15))
    assert ds.take(3) == [{"id": 0}, {"id": 1}, {"id": 2}]
    sizes = [len(b["id"]) for b in ds.iter_batches(batch_size=300)]
    assert sizes == [300, 300, 300, 100]
    assert [len(b["id"]) for b in ds.iter_batches(batch_size=300, drop_last=True)] == [300] * 3
    parts = ds.split(3, equal=True)
    assert [p.count() for p in parts] == [333, 333, 333]
    a, b, c = ds.split_at_indices([10, 400])
    assert [r["id"] for r in b.take_all()] == list(range(10, 400))
    train, test = ds.train_test_split(0.2)
    assert (train.count(), test.count()) == (800, 200)
    assert ds.repartition(3).num_blocks() == 3
    assert ds.union(ds).count() == 2000
    zipped = ds.zip(ds.map(lambda r: {"id": -r["id"]})).take(2)
    assert zipped == [{"id": 0, "id_1": 0}, {"id": 1, "id_1": -1}]
    mat = ds.map(lambda r: {"id": r["id"] + 1}).materialize()
    assert mat.sum("id") == sum(range(1, 1001)) and "Map" in mat.stats()


def test_sort_shuffle_sample_match_pandas() -> None:
    df = _frame()
    ds = rd.from_pandas([df.iloc[i:i + 100] for i in range(0, 500, 100)])
    _same(ds.sort("x").to_pandas(), df.sort_values("x"))
    _same(ds.sort(["k", "y"], descending=[True, False]).to_pandas(),
          df.sort_values(["k", "y"], ascending=[False, True]))
    shuffled = ds.random_shuffle(seed=3).to_pandas()
    assert sorted(shuffled["y"]) == list(df["y"]) and list(shuffled["y"]) != list(df["y"])
    blocks = ds.randomize_block_order(seed=1).to_pandas()
    assert sorted(blocks["y"]) == list(df["y"])
    sample = ds.random_sample(0.3, seed=0).count()
    assert 80 < sample < 220
    assert sorted(ds.unique("g")) == ["a", "b", "c"]


def test_groupby_and_aggregates_match_pandas() -> None:
    df = _frame()
    ds = rd.from_pandas([df.iloc[:250], df.iloc[250:]])
    grouped = df.groupby("k")
    _same(ds.groupby("k").count().to_pandas(),
          grouped.size().reset_index(name="count()"))
    for name in ("sum", "min", "max", "mean", "std"):
        got = getattr(ds.groupby("k"), name)("x").to_pandas()
        want = getattr(grouped["x"], name)().reset_index(name=f"{name}(x)")
        _same(got, want)
    multi = ds.groupby(["g", "k"]).sum("y").to_pandas()
    _same(multi, df.groupby(["g", "k"])["y"].sum().reset_index(name="sum(y)"))
    centered = ds.groupby("g").map_groups(
        lambda b: b.assign(x=b["x"] - b["x"].mean()), batch_format="pandas").to_pandas()
    want_c = df.assign(x=df["x"] - df.groupby("g")["x"].transform("mean"))
    _same(centered.sort_values("y"), want_c.sort_values("y"))
    assert ds.sum("y") == df["y"].sum()
    assert ds.min("x") == df["x"].min() and ds.max("x") == df["x"].max()
    assert ds.mean("x") == pytest.approx(df["x"].mean())
    assert ds.std("x") == pytest.approx(df["x"].std())
    assert ds.sum(["x", "y"]) == pytest.approx({"sum(x)": df["x"].sum(),
                                                 "sum(y)": df["y"].sum()})


def test_errors_name_the_fix() -> None:
    def broken(row: dict) -> dict:
        raise ValueError("bad row")

    with pytest.raises(ValueError, match="bad row"):
        rd.range(10).map(broken).take_all()
    with pytest.raises(nbdist.exceptions.NbdistError, match="batch_format"):
        rd.range(10).map_batches(lambda b: b, batch_format="arrow")
    with pytest.raises(nbdist.exceptions.NbdistError, match="same number of rows"):
        rd.range(10).zip(rd.range(11)).take_all()


def test_preprocessors_match_pandas() -> None:
    from nbdist.data.preprocessors import (
        Chain,
        Concatenator,
        LabelEncoder,
        MinMaxScaler,
        OneHotEncoder,
        StandardScaler,
    )

    df = _frame(200)
    ds = rd.from_pandas([df.iloc[:100], df.iloc[100:]])
    scaled = StandardScaler(["x"]).fit_transform(ds).to_pandas()
    assert np.allclose(scaled["x"], (df["x"] - df["x"].mean()) / df["x"].std())
    mm = MinMaxScaler(["y"]).fit_transform(ds).to_pandas()
    assert mm["y"].min() == 0 and mm["y"].max() == 1
    labels = LabelEncoder("g").fit_transform(ds).to_pandas()
    assert list(labels["g"]) == list(df["g"].map({"a": 0, "b": 1, "c": 2}))
    hot = OneHotEncoder(["g"]).fit_transform(ds).take(1)[0]["g"]
    assert hot.tolist() == [int(df["g"][0] == v) for v in "abc"]
    chain = Chain(StandardScaler(["x", "y"]), Concatenator(["x", "y"], "features"))
    out = chain.fit_transform(ds).take_batch(5)
    assert out["features"].shape == (5, 2) and "x" not in out


class DieOnce:
    """Ends its own process on its first call of the run (a marker file says it did)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __call__(self, batch: dict) -> dict:
        import os

        if not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(1)
        return batch


def test_a_dead_pool_actor_is_replaced_and_its_blocks_run_again(tmp_path) -> None:
    ds = rd.range(100, override_num_blocks=4).map_batches(
        DieOnce, fn_constructor_args=(str(tmp_path / "died"),), concurrency=1, num_cpus=0.5)
    assert ds.sum("id") == sum(range(100))
    assert (tmp_path / "died").exists()


def test_local_shuffle_buffer_mixes_rows_across_blocks() -> None:
    ds = rd.range(400, override_num_blocks=4)
    batches = list(ds.iter_batches(batch_size=100, local_shuffle_buffer_size=200,
                                   local_shuffle_seed=0))
    ids = np.concatenate([b["id"] for b in batches])
    assert sorted(ids) == list(range(400)) and list(ids) != list(range(400))
    assert batches[0]["id"].max() >= 100  # drawn from more than the first block

"""Where nbdist.data follows Ray Data 2.60 on details users meet: map_batches' batch_size
bundles small blocks (on tasks and on an actor pool), sort and groupby with null keys and
with several keys, against pandas computing the same thing."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from polling import poll

from nbdist import data as rd

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("cluster")]


def _sizes(batch: dict) -> dict:
    return {"n": np.array([len(batch["id"])]), "first": batch["id"][:1]}


class _Sizes:
    def __call__(self, batch: dict) -> dict:
        return _sizes(batch)


def test_map_batches_bundles_small_blocks_up_to_batch_size() -> None:
    # 20 blocks of 5 rows; batch_size 16: each task gets 4 blocks (20 rows), cut as 16 + 4.
    ds = rd.range(100, override_num_blocks=20)
    for out in (ds.map_batches(_sizes, batch_size=16),
                ds.map_batches(_Sizes, batch_size=16, concurrency=2)):
        rows = out.take_all()
        assert [r["n"] for r in rows] == [16, 4] * 5
        assert [r["first"] for r in rows] == [x for b in range(5) for x in (20 * b, 20 * b + 16)]
    # Without batch_size, one call per block, as before.
    assert [r["n"] for r in ds.map_batches(_sizes).take_all()] == [5] * 20
    # The rows are all there, in order, once.
    assert ds.map_batches(lambda b: b, batch_size=7).to_pandas()["id"].tolist() == list(range(100))


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    n = 300
    return pd.DataFrame({
        "k": pd.Series(rng.integers(0, 6, n), dtype="Int64").where(rng.random(n) > 0.2, None),
        "s": pd.Series(rng.choice(["a", "b", "c"], n), dtype=object).where(
            rng.random(n) > 0.1, None),
        "f": np.where(rng.random(n) > 0.15, rng.normal(size=n), np.nan),
        "v": np.arange(n),
    })


@pytest.mark.parametrize("key", ["k", "s", "f"])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_places_null_keys_last_as_pandas_does(key: str, descending: bool) -> None:
    df = _frame()
    ds = rd.from_pandas([df.iloc[i:i + 50] for i in range(0, len(df), 50)])
    got = ds.sort(key, descending=descending).to_pandas()
    want = df.sort_values(key, ascending=not descending, na_position="last", kind="stable")
    assert got[key].isna().tolist() == want[key].isna().tolist()
    assert got[key].dropna().tolist() == want[key].dropna().tolist()
    assert sorted(got["v"]) == list(range(len(df)))


def test_sort_by_several_keys_with_per_key_direction() -> None:
    df = _frame().dropna(subset=["k", "s"])
    ds = rd.from_pandas([df.iloc[i:i + 40] for i in range(0, len(df), 40)])
    got = ds.sort(["s", "k", "v"], descending=[False, True, False]).to_pandas()
    want = df.sort_values(["s", "k", "v"], ascending=[True, False, True])
    assert got["v"].tolist() == want["v"].tolist()


def test_groupby_counts_a_null_key_as_its_own_group() -> None:
    df = _frame()
    ds = rd.from_pandas([df.iloc[i:i + 60] for i in range(0, len(df), 60)])
    got = ds.groupby("s").count().to_pandas()
    want = df.groupby("s", dropna=False).size()
    assert {(None if pd.isna(k) else k): v for k, v in zip(got["s"], got["count()"],
                                                          strict=True)} == {
        (None if pd.isna(k) else k): v for k, v in want.items()}
    sums = ds.groupby(["s", "k"]).sum("v").to_pandas().dropna()
    want2 = df.dropna(subset=["s", "k"]).groupby(["s", "k"])["v"].sum()
    assert {(r.s, int(r.k)): r._3 for r in sums.itertuples()} == dict(want2.items())


def test_a_written_folder_reads_back_in_the_order_written(tmp_path) -> None:
    ds = rd.range(120, override_num_blocks=12).map_batches(lambda b: {"id": b["id"][::-1]})
    ds.write_parquet(str(tmp_path / "pq"))
    ds.write_csv(str(tmp_path / "csv"))
    want = ds.to_pandas()["id"].tolist()
    assert rd.read_parquet(str(tmp_path / "pq")).to_pandas()["id"].tolist() == want
    assert rd.read_csv(str(tmp_path / "csv")).to_pandas()["id"].tolist() == want


def test_aggregates_after_a_parquet_read_read_only_their_column(tmp_path) -> None:
    df = _frame().astype({"k": "float64"}).fillna({"f": 0.5})
    rd.from_pandas([df.iloc[i:i + 100] for i in range(0, len(df), 100)]).write_parquet(
        str(tmp_path / "pq"))
    ds = rd.read_parquet(str(tmp_path / "pq"))
    tasks = list(ds._plan.project(["f"]).source.items(None))
    assert len(tasks) == 3 and all(t.args[2] == ["f"] for t in tasks)  # one column read
    assert ds._plan.project(["nope"]) is ds._plan  # unknown column: the read is unchanged
    assert ds.sum("f") == pytest.approx(df["f"].sum())
    assert ds.min("k") == df["k"].min() and ds.max("v") == df["v"].max()
    assert ds.mean(["f", "v"]) == pytest.approx({"mean(f)": df["f"].mean(),
                                                 "mean(v)": df["v"].mean()})
    for ddof in (0, 1, 2):
        assert ds.std("f", ddof=ddof) == pytest.approx(df["f"].std(ddof=ddof))
    # After a transform the columns it uses are not known: the whole rows are read.
    doubled = ds.map_batches(lambda b: {"w": b["v"] * 2})
    assert doubled._plan.project(["w"]) is doubled._plan
    assert doubled.sum("w") == 2 * df["v"].sum()


def test_an_aggregate_over_many_blocks_sees_each_block_as_it_is() -> None:
    # 50 blocks; the aggregate deals them to a few tasks, and the map still gets one batch
    # per block (20 rows), as without the aggregate.
    ds = rd.range(1000, override_num_blocks=50).map_batches(
        lambda b: {"n": np.array([len(b["id"])]), "s": np.array([b["id"].sum()])})
    assert ds.max("n") == 20 and ds.sum("n") == 1000 and ds.sum("s") == 499500
    assert ds.count() == 50 and ds.min("n") == 20


def test_custom_aggregate_fn_and_std_ddof_per_group_as_pandas_computes_them() -> None:
    from nbdist.data import AggregateFn, Count, Std

    df = _frame().dropna(subset=["s"]).fillna({"f": 0.0})
    ds = rd.from_pandas([df.iloc[i:i + 50] for i in range(0, len(df), 50)])
    span = AggregateFn(init=lambda key: (np.inf, -np.inf), merge=None, name="span(v)",
                       accumulate_row=lambda acc, row: (min(acc[0], row["v"]),
                                                        max(acc[1], row["v"])),
                       finalize=lambda acc: acc[1] - acc[0])
    squares = AggregateFn(lambda key: 0.0, lambda a, b: a + b, "sq(f)",
                          accumulate_block=lambda acc, t: acc + float((t["f"].to_numpy() ** 2)
                                                                      .sum()))
    got = ds.groupby("s").aggregate(Count(), span, squares, Std("f", ddof=0)).to_pandas()
    g = df.groupby("s")
    assert got["s"].tolist() == sorted(df["s"].unique())
    assert got["count()"].tolist() == g.size().tolist()
    assert got["span(v)"].tolist() == (g["v"].max() - g["v"].min()).tolist()
    assert np.allclose(got["sq(f)"], g["f"].apply(lambda f: (f ** 2).sum()))
    assert np.allclose(got["std(f)"], g["f"].std(ddof=0))
    assert np.allclose(ds.groupby("s").std("f", ddof=2).to_pandas()["std(f)"],
                       g["f"].std(ddof=2))
    whole = ds.aggregate(Count(), span)
    assert whole == {"count()": len(df), "span(v)": df["v"].max() - df["v"].min()}


class _Pid:
    def __call__(self, batch: dict) -> dict:
        import os
        import time

        time.sleep(0.05)  # deliberate sleep: a block's work, so the pool is busy
        return {"pid": np.full(len(batch["id"]), os.getpid())}


def test_an_actor_pool_with_min_and_max_grows_while_there_is_room() -> None:
    import nbdist

    # (1, 2) on 2 CPUs, the reads fused into the actors: the pool grows to 2 actors.
    grown = rd.range(200, override_num_blocks=20).map_batches(_Pid, concurrency=(1, 2))
    assert len(set(grown.to_pandas()["pid"])) == 2
    # (1, 4): never more actors than the CPUs free (a third and fourth could not start),
    # and the pipeline finishes.
    capped = rd.range(200, override_num_blocks=20).map_batches(_Pid, concurrency=(1, 4))
    assert 1 <= len(set(capped.to_pandas()["pid"])) <= 2
    # With a task stage before it (its own CPUs), the pool leaves a CPU to those tasks.
    upstream = rd.range(200, override_num_blocks=20).map_batches(
        lambda b: b, num_cpus=1).map_batches(_Pid, concurrency=(1, 2))
    assert len(upstream.to_pandas()) == 200
    poll(lambda: nbdist.available_resources().get("CPU") == 2.0, timeout=10,
         what="every actor of the pools released")

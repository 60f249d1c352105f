"""Pure parts of nbdist.data, without a cluster: blocks and batch formats, the filter
expression reader, transforms on one block, and what a plan knows without running."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from nbdist.data import block as B
from nbdist.data.plan import MapOp, Plan, ReadTask, reads_source
from nbdist.data.transforms import Transform, apply_chain, instantiate, parse_expr
from nbdist.exceptions import NbdistError


def test_batches_round_trip_through_every_format() -> None:
    table = B.from_batch({"x": np.arange(4), "t": np.arange(8).reshape(4, 2),
                          "s": np.array(["a", "b", "c", "d"], dtype=object)})
    numpy = B.to_batch(table, "numpy")
    assert numpy["t"].shape == (4, 2) and numpy["s"].tolist() == ["a", "b", "c", "d"]
    assert B.from_batch(B.to_batch(table, "pandas")).equals(table)
    assert B.to_batch(table, "pyarrow") is table
    rows = list(B.iter_rows(table))
    assert rows[1]["x"] == 1 and rows[1]["t"].tolist() == [2, 3] and rows[1]["s"] == "b"
    assert B.from_rows([1, 2]).to_pylist() == [{"item": 1}, {"item": 2}]
    assert [b.num_rows for b in B.batches(table, 3)] == [3, 1]
    with pytest.raises(NbdistError, match="batch_format"):
        B.to_batch(table, "arrow")


def test_filter_expressions_read_as_arrow() -> None:
    table = pa.table({"x": [1, 5, 9, None], "g": ["a", "b", "a", "c"]})
    assert table.filter(parse_expr("x > 3 and g == 'a'"))["x"].to_pylist() == [9]
    assert table.filter(parse_expr("g in ['b', 'c'] or x < 2"))["x"].to_pylist() == \
        [1, 5, None]
    assert table.filter(parse_expr("x is None"))["g"].to_pylist() == ["c"]
    assert table.filter(parse_expr("not (x * 2 >= 10)"))["x"].to_pylist() == [1]
    with pytest.raises(NbdistError, match="filter expression"):
        parse_expr("x >")


class Scale:
    def __init__(self, k: int) -> None:
        self.k = k

    def __call__(self, batch: dict) -> dict:
        return {"x": batch["x"] * self.k}


def test_a_fused_chain_on_one_block() -> None:
    chain = [Transform("map_batches", Scale, {"fn_constructor_args": (3,), "batch_size": 2}),
             Transform("filter", None, {"expr": "x > 3"}),
             Transform("add_column", lambda df: df["x"] + 1, {"col": "y"}),
             Transform("rename", None, {"names": {"y": "z"}})]
    out = apply_chain(pa.table({"x": [1, 2, 3]}), chain, instantiate(chain))
    assert out.to_pylist() == [{"x": 6, "z": 7}, {"x": 9, "z": 10}]


def test_a_plan_knows_its_rows_until_an_op_may_change_them() -> None:
    reads = [ReadTask(lambda: pa.table({"x": [1]}), rows=1) for _ in range(3)]
    plan = Plan(reads_source("Read", reads))
    assert plan.known_rows == 3
    keeps = plan.with_op(MapOp((Transform("map", abs),), keeps_rows=True))
    assert keeps.known_rows == 3 and "Map(abs)" in keeps.describe()
    assert keeps.with_op(MapOp((Transform("filter", abs),))).known_rows is None
    assert Plan(reads_source("Read", [ReadTask(abs)])).known_rows is None

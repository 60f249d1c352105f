"""Pure parts of nbdist.util, nbdist.dag and tqdm_ray: no cluster needed."""

from __future__ import annotations

import io
import threading

import pytest

from nbdist import events
from nbdist.dag import InputNode, MultiOutputNode
from nbdist.experimental import tqdm_ray
from nbdist.util import inspect_serializability


class Holder:
    def __init__(self):
        self.fine = 1
        self.bad = threading.Lock()


def test_inspect_serializability_names_the_culprit_and_its_path() -> None:
    out = io.StringIO()
    lock = threading.Lock()

    def uses_lock():  # a local function pickles by value, with what it captures
        return lock

    ok, failures = inspect_serializability(uses_lock, name="uses_lock", print_file=out)
    assert not ok
    [failure] = failures
    assert failure.obj is lock and failure.path == ("uses_lock", "lock")
    assert failure.parent is uses_lock and failure.name == "lock"
    assert "FAIL" in out.getvalue()
    ok, failures = inspect_serializability(Holder(), print_file=out)
    assert not ok and [f.path for f in failures] == [("bad",)]
    assert inspect_serializability([1, "two"], print_file=out) == (True, set())


def test_input_only_dag_executes_without_a_cluster() -> None:
    with InputNode() as inp:
        dag = MultiOutputNode([inp[0], inp.key, inp["key"], inp])
    got = dag.execute(1, key=2)
    assert got[:3] == [1, 2, 2]
    assert got[3][0] == 1 and got[3]["key"] == 2  # several inputs: one DAGInputData
    with InputNode() as inp:
        single = MultiOutputNode([inp, inp[1]])
    assert single.execute((5, 6)) == [(5, 6), 6]  # one input: the value itself


def test_input_attribute_reads_an_object_attribute() -> None:
    class Point:
        x = 3

    with InputNode() as inp:
        dag = MultiOutputNode([inp.x])
    assert dag.execute(Point()) == [3]
    assert inp.x is inp.x  # one node per key, as Ray keeps them


def test_a_long_chain_of_input_nodes_does_not_recurse() -> None:
    with InputNode() as inp:
        node = MultiOutputNode([inp])
        for _ in range(5000):
            node = MultiOutputNode([node])
    value = node.execute(7)
    for _ in range(5001):
        value = value[0]
    assert value == 7


def out(line: str, stream: str = "stdout") -> events.Output:
    return events.Output(0.0, "t1", "work", 123, stream, line)


def test_tqdm_filter_takes_progress_lines_and_passes_the_rest_on() -> None:
    states: list = []
    tqdm_ray.set_renderer(states.append)
    try:
        marked = tqdm_ray.MAGIC + '{"uuid": "u", "desc": "d", "total": 2, "x": 1, ' \
                                   '"closed": false}'
        passed = tqdm_ray.take_progress([out(marked), out("plain"), out(marked, "stderr")])
    finally:
        tqdm_ray.set_renderer(None)
    assert [s["x"] for s in states] == [1]
    assert states[0]["task"] == "work" and states[0]["pid"] == 123
    assert [e.line for e in passed] == ["plain", marked]


def test_tqdm_text_line() -> None:
    text = tqdm_ray._bar_text({"desc": "d", "total": 4, "x": 1, "closed": False})
    assert text.startswith("d:  25%|#####") and text.endswith("1/4")
    bar = tqdm_ray.tqdm(total=3, desc="local")
    seen: list = []
    tqdm_ray.set_renderer(seen.append)
    try:
        bar.update(3)
        bar.close()
    finally:
        tqdm_ray.set_renderer(None)
    assert seen[-1]["x"] == 3 and seen[-1]["closed"]
    with pytest.raises(ValueError):
        list(tqdm_ray.tqdm())

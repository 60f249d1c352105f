"""The DAG API (``.bind``, ``InputNode``, ``MultiOutputNode``, ``execute``,
``experimental_compile``) on both backends, written as Ray's documentation writes it."""

from __future__ import annotations

import pytest

import nbdist as ray
from nbdist.dag import InputNode, MultiOutputNode

pytestmark = pytest.mark.timeout(180)


@ray.remote
class Model:
    def __init__(self, weight):
        self.weight = weight
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.weight * x

    def count(self):
        return self.calls

    @ray.method(num_returns=2)
    def pair(self, x):
        return x, -x


@ray.remote
def combine(a, b):
    return a + b


@ray.remote
def inc(x):
    return x + 1


@ray.remote
def kinds(items):
    return [type(v).__name__ for v in items]


def test_rays_input_node_example(backend: str) -> None:
    with InputNode() as dag_input:
        m1 = Model.bind(1)
        m2 = Model.bind(2)
        m1_output = m1.forward.bind(dag_input[0])
        m2_output = m2.forward.bind(dag_input.x)
        dag = combine.bind(m1_output, m2_output)
    ref = dag.execute(1, x=2)
    assert isinstance(ref, ray.ObjectRef)
    assert ray.get(ref) == 1 * 1 + 2 * 2
    assert ray.get(dag.execute(3, x=10)) == 3 + 20


def test_single_input_and_its_items(backend: str) -> None:
    with InputNode() as inp:
        whole = inc.bind(inp)
        parts = MultiOutputNode([inc.bind(inp[0]), inc.bind(inp[1])])
        keyed = inc.bind(inp["k"])
    assert ray.get(whole.execute(41)) == 42
    refs = parts.execute([10, 20])
    assert isinstance(refs, list) and ray.get(refs) == [11, 21]
    assert ray.get(keyed.execute({"k": 1})) == 2


def test_shared_node_runs_once_per_execution_and_refs_flow(backend: str) -> None:
    counter = Model.remote(1)
    with InputNode() as inp:
        shared = counter.forward.bind(inp)
        dag = MultiOutputNode([combine.bind(shared, shared), inc.bind(shared)])
    assert ray.get(dag.execute(5)) == [10, 6]
    assert ray.get(counter.count.remote()) == 1
    nested = kinds.bind([inc.bind(1), 2])  # a node inside a list arrives as a ref, as in Ray
    assert ray.get(nested.execute()) == ["ObjectRef", "int"]


def test_class_node_calls_in_bind_order_and_a_fresh_actor_per_execution(backend: str) -> None:
    model = Model.bind(3)
    first = model.forward.bind(1)
    second = model.count.bind()
    dag = MultiOutputNode([second, first])
    assert ray.get(dag.execute()) == [1, 3]
    assert ray.get(dag.execute()) == [1, 3]  # a new actor: its count starts again
    handle = model.execute()
    assert isinstance(handle, ray.ActorHandle)
    assert ray.get(handle.forward.remote(2)) == 6


def test_method_with_several_returns_binds_one_node_per_return(backend: str) -> None:
    model = Model.remote(1)
    with InputNode() as inp:
        plus, minus = model.pair.bind(inp)
        dag = MultiOutputNode([minus, plus])
    assert ray.get(dag.execute(4)) == [-4, 4]


def test_compiled_dag_gives_the_same_results_and_keeps_actor_state(backend: str) -> None:
    model = Model.remote(2)
    with InputNode() as inp:
        dag = combine.bind(model.forward.bind(inp), 1)
    compiled = dag.experimental_compile()
    try:
        assert [ray.get(compiled.execute(i)) for i in range(3)] == [
            ray.get(dag.execute(i)) for i in range(3)]
        assert ray.get(model.count.remote()) == 6
    finally:
        compiled.teardown()


def test_input_node_outside_a_with_block_is_refused(backend: str) -> None:
    inp = InputNode()
    with pytest.raises(ValueError, match="with InputNode"):
        inc.bind(inp).execute(1)
    with pytest.raises(AttributeError):
        Model.bind(1).no_such_method  # noqa: B018
    with pytest.raises(AttributeError):
        Model.bind(1).forward.remote(1)

"""A bound DAG on a cell's last line shows in a real kernel as a graph of bound nodes, and
showing it submits nothing."""

from __future__ import annotations

import pytest
from kernel_session import KernelSession

pytestmark = pytest.mark.timeout(180)

DAG = """
from nbdist.dag import InputNode, MultiOutputNode

@nbdist.remote
def double(x):
    return 2 * x

@nbdist.remote
def total(*xs):
    return sum(xs)

with InputNode() as inp:
    d = double.bind(inp)
    dag = MultiOutputNode([total.bind(d, inp), d])
dag
"""

SUBMITTED = ("from nbdist import events\n"
             "print(sorted({e.name for e in events.recent() "
             "if isinstance(e, events.TaskSubmitted)}))")


def test_a_bound_dag_displays_as_a_graph_without_running(shared_kernel: KernelSession) -> None:
    k = shared_kernel
    _, cell = k.execute(DAG)
    [result] = [m["content"]["data"] for m in k.messages_for(cell)
                if m["msg_type"] == "execute_result"]
    html = result["text/html"]
    assert "<svg" in html and 'data-dag-nodes="4"' in html
    for name in ("input", "double", "total", "outputs"):
        assert f'data-dag-node="{name}"' in html
    assert html.count('data-state="bound"') == 4
    assert result["text/plain"] == "MultiOutputNode(2)"
    assert "double" not in k.ok(SUBMITTED)  # displaying it ran nothing
    assert k.ok("print(nbdist.get(dag.execute(3)))").strip() == "[9, 6]"
    assert "double" in k.ok(SUBMITTED)

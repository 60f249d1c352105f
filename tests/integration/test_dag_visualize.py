"""``CompiledDAG.visualize``, as Ray's compiled-graph guide calls it (``cgraph_visualize.py``):
the graph as text with ``format="ascii"``; other formats need the ``graphviz`` package, and
without it the error says so."""

from __future__ import annotations

import sys

import pytest

import nbdist
from nbdist.dag import InputNode, MultiOutputNode

pytestmark = [pytest.mark.timeout(60), pytest.mark.nbdist_only]


@nbdist.remote
class Stage:
    def inc(self, x: int) -> int:
        return x + 1

    def double(self, x: int) -> int:
        return x * 2


def _compiled() -> object:
    first, second = Stage.remote(), Stage.remote()
    with InputNode() as inp:
        dag = MultiOutputNode([first.inc.bind(inp), second.double.bind(first.inc.bind(inp))])
    return dag.experimental_compile()


def test_ascii_lists_every_node_with_the_nodes_it_takes_from(cluster) -> None:
    compiled = _compiled()
    assert compiled.visualize(format="ascii") == (
        "0: input\n1: inc <- 0\n2: inc <- 0\n3: double <- 2\n4: outputs <- 1, 3\n")
    assert nbdist.get(compiled.execute(3)) == [4, 8]


def test_an_image_format_without_graphviz_says_what_to_install(
        cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "graphviz", None)  # as if it were not installed
    with pytest.raises(ImportError, match="install graphviz"):
        _compiled().visualize()

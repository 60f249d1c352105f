"""A bound DAG's picture (nbdist.dag.display): its nodes, edges and layout, from the DAG
object alone (nothing is submitted, no cluster runs)."""

from __future__ import annotations

import re

import nbdist
from nbdist.dag import InputNode, MultiOutputNode
from nbdist.dag.display import BOX_H, GAP_Y, PAD, dag_graph, dag_html, dag_svg


@nbdist.remote
def add_one(x):
    return x + 1


@nbdist.remote
def combine(a, b):
    return a + b


@nbdist.remote
class Counter:
    def inc(self, x):
        return x

    def read(self):
        return 0


def _dag():
    with InputNode() as inp:
        a = add_one.bind(inp)
        c = Counter.bind()
        inc = c.inc.bind(a)
        read = c.read.bind()
        return MultiOutputNode([combine.bind(a, inp.scale), inc, read])


def _labels(svg: str) -> list[str]:
    return re.findall(r'data-dag-node="([^"]*)"', svg)


def test_nodes_and_edges_of_a_bound_dag() -> None:
    nodes, edges = dag_graph(_dag())
    names = [type(n).__name__ for n in nodes]
    assert names[-1] == "MultiOutputNode" and names.count("ClassMethodNode") == 2
    svg = dag_svg(_dag())
    assert sorted(_labels(svg)) == sorted(
        ["input", "input.scale", "add_one", "combine", "Counter", "Counter.inc",
         "Counter.read", "outputs"])
    assert svg.count('data-state="bound"') == len(nodes) == 8
    # An actor's calls keep their bind order: one dashed edge from inc to read.
    assert len(re.findall(r'data-dag-edge="order"', svg)) == 1
    label = {i: svg_label for i, svg_label in enumerate(_labels(svg))}
    pairs = {(label[a], label[b]) for a, b, kind in edges if kind == "data"}
    assert {("input", "add_one"), ("add_one", "combine"), ("input.scale", "combine"),
            ("Counter", "Counter.inc"), ("add_one", "Counter.inc"),
            ("Counter.read", "outputs")} <= pairs


def test_inputs_are_left_of_what_takes_them() -> None:
    svg = dag_svg(_dag())
    xs = {name: int(x) for name, x in re.findall(
        r'data-dag-node="([^"]*)".*?<rect x="(\d+)"', svg)}
    assert xs["input"] < xs["add_one"] < xs["combine"] < xs["outputs"]
    assert xs["Counter"] < xs["Counter.inc"] < xs["Counter.read"]


def test_long_edges_run_in_the_gaps_between_rows() -> None:
    svg = dag_svg(_dag())
    paths = re.findall(r'd="(M[\d,. L]+)"', svg)
    long_edges = [p for p in paths if p.count("L") > 1]
    assert long_edges  # combine -> outputs and others span several columns
    rows = int(re.search(r'height="(\d+)"', svg)[1]) // (BOX_H + GAP_Y) + 1
    boxes = [(PAD + r * (BOX_H + GAP_Y), PAD + r * (BOX_H + GAP_Y) + BOX_H) for r in range(rows)]
    for path in long_edges:
        points = [tuple(map(float, p.split(","))) for p in re.findall(r"[\d.]+,[\d.]+", path)]
        lane = points[2][1]  # the horizontal run from the column gap after the source
        assert points[2][1] == points[3][1]
        assert not any(top <= lane <= bottom for top, bottom in boxes), (path, boxes)


def test_html_caption_and_input_node_display() -> None:
    html = dag_html(_dag())
    assert 'data-dag-nodes="8"' in html and "not submitted" in html and "<svg" in html
    inp = InputNode()
    # IPython's probe for objects that answer every attribute must not become an input field.
    assert not hasattr(inp, "_ipython_canary_method_should_not_exist_")
    assert _labels(inp._repr_html_()) == ["input"]
    assert not inp._attributes

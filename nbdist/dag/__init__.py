"""``nbdist.dag``: Ray's DAG API (``f.bind(...)``, ``InputNode``, ``dag.execute(...)``) built
on nbdist's public API, so a DAG runs the same on nbdist's engine and on ``backend="ray"``.

    nodes.py      the node types and ``execute``: a post-order walk that submits each node
                  once per execution (``.remote`` on the bound function, actor class or
                  method) and passes refs along the edges
    compiled.py   ``experimental_compile()``: the same DAG with its actors created once
    display.py    a bound DAG drawn as an inline SVG (its ``_repr_html_`` in a notebook)
    input_node.py, output_node.py    Ray's module paths for the same classes

``.bind`` on `nbdist.RemoteFunction`, `nbdist.ActorClass` and actor methods only builds nodes
here; nothing runs until ``execute``.
"""

from __future__ import annotations

from nbdist.dag.compiled import CompiledDAG
from nbdist.dag.nodes import (
    ClassMethodNode,
    ClassNode,
    DAGInputData,
    DAGNode,
    FunctionNode,
    InputAttributeNode,
    InputNode,
    MultiOutputNode,
)

__all__ = [
    "ClassMethodNode",
    "ClassNode",
    "CompiledDAG",
    "DAGInputData",
    "DAGNode",
    "FunctionNode",
    "InputAttributeNode",
    "InputNode",
    "MultiOutputNode",
]

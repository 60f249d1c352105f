"""A bound DAG drawn before it runs: the rich display (``_repr_html_``) of a DAG node.

    dag = g.bind(f.bind(inp), inp)   # in a notebook, ``dag`` on the last line of a cell
        └─▶ DAGNode._repr_html_ ─▶ dag_html(dag): an inline SVG of the nodes below ``dag``

Binding submits nothing, so there is no task for the panel to show yet; the DAG is a plain
object in the driver. Its picture is therefore made from the object itself, as a string (SVG
inside a small HTML block): it needs no widget library and no JavaScript, works in any
frontend and offline, and is saved with the notebook. Nodes are drawn as the panel draws a
task not yet submitted, outlined and dashed ("bound"), with the same left-to-right layered
layout: a node's column is one right of its furthest input, so data flows left to right and
the DAG's output is the rightmost box.

Edges: solid from what a node takes (arguments, an InputNode, the actor a method runs on) to
the node; dashed from an actor's previous bound call to its next, the order ``execute``
keeps. Past `MAX_DRAWN` nodes only the counts are shown.
"""

from __future__ import annotations

import html
from typing import Any

MAX_DRAWN = 300
BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 132, 24, 36, 12, 8
ORDER_EDGE = "prev_class_method_call"


def _is_node(value: Any) -> bool:
    # By shape, not by class: nodes.py imports this module, not the other way round.
    return callable(getattr(type(value), "_children", None)) and callable(
        getattr(type(value), "get_other_args_to_resolve", None))


def _nodes_in(value: Any) -> list[Any]:
    """The nodes inside ``value`` (itself, or nested in lists, tuples and dicts)."""
    if _is_node(value):
        return [value]
    if isinstance(value, (list, tuple)):
        return [n for item in value for n in _nodes_in(item)]
    if isinstance(value, dict):
        return [n for item in value.values() for n in _nodes_in(item)]
    return []


def _label(node: Any) -> str:
    kind = type(node).__name__
    if kind == "InputNode":
        return "input"
    if kind == "InputAttributeNode":
        key = node.key
        return f"input.{key}" if node._accessor == "__getattr__" else f"input[{key!r}]"
    if kind in ("FunctionNode", "ClassNode"):
        return str(getattr(node._body, "__name__", kind))
    if kind == "ClassMethodNode":
        actor = node.get_other_args_to_resolve().get("parent_class_node")
        owner = getattr(getattr(actor, "_body", None), "__name__", None)
        name = f"{owner}.{node._method_name}" if owner else node._method_name
        return name if node._output_index is None else f"{name}[{node._output_index}]"
    if kind == "MultiOutputNode":
        return "outputs"
    return kind


def dag_graph(root: Any) -> tuple[list[Any], list[tuple[int, int, str]]]:
    """The nodes below ``root`` (inputs before the nodes that take them, ``root`` last) and
    the edges between them as (from index, to index, "data" or "order")."""
    order: list[Any] = []
    index: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in index:
            continue
        if not expanded:
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(node._children()) if id(c) not in index)
            continue
        index[id(node)] = len(order)
        order.append(node)
    edges: list[tuple[int, int, str]] = []
    for node in order:
        for key, value in node.get_other_args_to_resolve().items():
            kind = "order" if key == ORDER_EDGE else "data"
            edges += [(index[id(src)], index[id(node)], kind) for src in _nodes_in(value)]
        edges += [(index[id(src)], index[id(node)], "data")
                  for src in _nodes_in([node.get_args(), node.get_kwargs()])]
    return order, sorted(set(edges))


def _layout(count: int, edges: list[tuple[int, int, str]]) -> list[tuple[int, int]]:
    """(column, row) per node, as the panel lays out tasks: one column right of its furthest
    input, the row of that input if free in the column, else the next free row below it."""
    inputs: dict[int, list[int]] = {}
    for src, dst, _ in edges:
        inputs.setdefault(dst, []).append(src)
    used: set[tuple[int, int]] = set()
    cells: list[tuple[int, int]] = []
    for i in range(count):  # inputs come first in the order, so their cells are known
        srcs = inputs.get(i, [])
        furthest = max(srcs, key=lambda s: cells[s][0], default=None)
        col = 0 if furthest is None else cells[furthest][0] + 1
        row = 0 if furthest is None else cells[furthest][1]
        while (col, row) in used:
            row += 1
        used.add((col, row))
        cells.append((col, row))
    return cells


def _edge_svg(a: tuple[int, int], b: tuple[int, int], kind: str) -> str:
    """An edge from the cell ``a`` to the cell ``b`` (always in a column further right). One
    to the next column is a curve; a longer one runs in the free gaps (down the column gap
    after ``a``, along the row gap under ``a``'s row, down the gap before ``b``), so it never
    hides behind a box it passes."""
    x1, y1 = PAD + a[0] * (BOX_W + GAP_X) + BOX_W, PAD + a[1] * (BOX_H + GAP_Y) + BOX_H / 2
    x2, y2 = PAD + b[0] * (BOX_W + GAP_X), PAD + b[1] * (BOX_H + GAP_Y) + BOX_H / 2
    if b[0] - a[0] <= 1:
        mid = (x1 + x2) / 2
        d = f"M{x1:.0f},{y1:.0f} C{mid:.0f},{y1:.0f} {mid:.0f},{y2:.0f} {x2:.0f},{y2:.0f}"
    else:
        xa, xb = x1 + GAP_X / 2, x2 - GAP_X / 2
        lane = y1 + BOX_H / 2 + GAP_Y / 2
        d = (f"M{x1:.0f},{y1:.0f} L{xa:.0f},{y1:.0f} L{xa:.0f},{lane:.0f} L{xb:.0f},{lane:.0f} "
             f"L{xb:.0f},{y2:.0f} L{x2:.0f},{y2:.0f}")
    dash = ' stroke-dasharray="4 3"' if kind == "order" else ""
    return (f'<path data-dag-edge="{kind}" d="{d}" fill="none" stroke="#888"{dash} '
            'marker-end="url(#nbdist-dag-arrow)"/>')


def _node_svg(node: Any, cell: tuple[int, int]) -> str:
    label = _label(node)
    shown = label if len(label) <= 20 else label[:19] + "…"
    x, y = PAD + cell[0] * (BOX_W + GAP_X), PAD + cell[1] * (BOX_H + GAP_Y)
    kind = type(node).__name__
    return (f'<g data-dag-node="{html.escape(label)}" data-dag-kind="{kind}" '
            f'data-state="bound"><title>{html.escape(label)} ({kind}, bound)</title>'
            f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="4" fill="#fff" '
            f'stroke="#777" stroke-dasharray="5 3"/><text x="{x + BOX_W / 2:.0f}" '
            f'y="{y + BOX_H / 2 + 4:.0f}" text-anchor="middle" font-size="11" '
            f'font-family="sans-serif" fill="#333">{html.escape(shown)}</text></g>')


def dag_svg(root: Any) -> str:
    """An SVG of the DAG below ``root``, every node marked ``data-state="bound"``."""
    return _svg(*dag_graph(root))


def _svg(nodes: list[Any], edges: list[tuple[int, int, str]]) -> str:
    cells = _layout(len(nodes), edges)
    width = PAD * 2 + (max(c for c, _ in cells) + 1) * (BOX_W + GAP_X) - GAP_X
    height = PAD * 2 + (max(r for _, r in cells) + 1) * (BOX_H + GAP_Y) - GAP_Y
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="nbdist-dag" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}">',
             '<defs><marker id="nbdist-dag-arrow" viewBox="0 0 8 8" refX="8" refY="4" '
             'markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" '
             'fill="#888"/></marker></defs>']
    parts += [_edge_svg(cells[a], cells[b], kind) for a, b, kind in edges]
    parts += [_node_svg(node, cell) for node, cell in zip(nodes, cells, strict=True)]
    parts.append("</svg>")
    return "".join(parts)


def dag_html(root: Any) -> str:
    """The rich display of a bound DAG: a caption with its counts, and its SVG."""
    nodes, edges = dag_graph(root)
    caption = (f"DAG, bound, not submitted: {len(nodes)} nodes, {len(edges)} edges; "
               "<code>.execute(...)</code> runs it")
    if len(nodes) > MAX_DRAWN:
        return (f'<div class="nbdist-dag-view" data-dag-nodes="{len(nodes)}">{caption} '
                f"(too many to draw: over {MAX_DRAWN})</div>")
    return (f'<div class="nbdist-dag-view" data-dag-nodes="{len(nodes)}" '
            f'data-dag-edges="{len(edges)}"><div style="font-size:12px;color:#555">'
            f'{caption}</div><div style="overflow:auto">{_svg(nodes, edges)}</div></div>')


def dag_dot(root: Any) -> str:
    """The DAG below ``root`` as Graphviz DOT text: one box per node, solid data edges,
    dashed order edges (an actor's calls in the order ``execute`` keeps)."""
    nodes, edges = dag_graph(root)
    lines = ["digraph compiled_graph {", "  rankdir=LR;", "  node [shape=box];"]
    for i, node in enumerate(nodes):
        label = _label(node).replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'  {i} [label="{i}: {label}"];')
    for src, dst, kind in edges:
        lines.append(f"  {src} -> {dst}" + (" [style=dashed];" if kind == "order" else ";"))
    lines.append("}")
    return "\n".join(lines) + "\n"


def dag_text(root: Any) -> str:
    """The DAG below ``root`` as plain text: its nodes in an order that runs inputs first, each
    with the nodes it takes from."""
    nodes, edges = dag_graph(root)
    takes: dict[int, list[str]] = {}
    for src, dst, kind in edges:
        takes.setdefault(dst, []).append(f"{src}" if kind == "data" else f"{src} (order)")
    return "".join(f"{i}: {_label(node)}" + (f" <- {', '.join(takes[i])}" if i in takes else "")
                   + "\n" for i, node in enumerate(nodes))

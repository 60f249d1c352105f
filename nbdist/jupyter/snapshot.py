"""The static snapshot of the views: the panel's last state as HTML with an inline SVG graph,
for pages where no widget manager runs (nbconvert, GitHub, a static HTML export).

What flows in: a snapshot message of the comm schema (``Model.snapshot()``, docs/comm-
protocol.md). What flows out: one self-contained HTML fragment (no script, no network): a line
of totals, the task graph as SVG, and the waits and runs as short lists. The graph follows the
panel's rules: library plumbing (``library_call`` with role "control") is left out unless
``show_internal``; a call running a run's member is drawn as that trial or rank; a node sits one
column right of its furthest predecessor (the panel's StableLayout, without its stability,
which a single picture does not need); a grouped graph draws its groups with their counts.
Large graphs are cut to ``MAX_NODES`` nodes, and the cut is said.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

MAX_NODES = 400
NODE_W, NODE_H, CELL_W, CELL_H, PAD = 150, 20, 170, 28, 8
COLORS = {"pending": "#b0b7c3", "scheduled": "#f2c94c", "running": "#2f80ed",
          "finished": "#27ae60", "failed": "#eb5757"}
DARK_TEXT = ("pending", "scheduled")


def _internal(mark: Mapping[str, str] | None) -> bool:
    return mark is not None and mark.get("role") != "work"


def _label(task: Mapping[str, Any]) -> str:
    mark = task.get("library_call")
    if mark and mark.get("role") == "work":
        return f"trial {mark['member']}" if mark["library"] == "tune" else str(mark["member"])
    return str(task["name"])


def _group_state(counts: Mapping[str, int]) -> str:
    for state in ("running", "scheduled", "pending", "failed"):
        if counts.get(state):
            return state
    return "finished"


def graph_nodes(snapshot: Mapping[str, Any], show_internal: bool = False
                ) -> list[tuple[str, str, str, int, int]]:
    """(id, label, state, column, row) of each node to draw, in drawing order."""
    if snapshot.get("grouped"):
        groups = [g for g in snapshot.get("groups", {}).values()
                  if show_internal or not _internal(g.get("library_call"))]
        return [(g["id"], f"{g['name']} ×{g['total']}", _group_state(g["counts"]), 0, i)
                for i, g in enumerate(groups[:MAX_NODES])]
    tasks = sorted((t for t in snapshot.get("tasks", {}).values()
                    if show_internal or not _internal(t.get("library_call"))),
                   key=lambda t: (t.get("submitted") or 0.0, t["id"]))[:MAX_NODES]
    cells: dict[str, tuple[int, int]] = {}
    heights: list[int] = []
    out = []
    for task in tasks:
        col = 1 + max((cells[d][0] for d in task.get("dep_tasks", ()) if d in cells),
                      default=-1)
        while len(heights) <= col:
            heights.append(0)
        row = heights[col]
        heights[col] = row + 1
        cells[task["id"]] = (col, row)
        out.append((task["id"], _label(task), task["state"], col, row))
    return out


def graph_svg(snapshot: Mapping[str, Any], show_internal: bool = False) -> str:
    nodes = graph_nodes(snapshot, show_internal)
    if not nodes:
        return "<p class='nbdist-snapshot-empty'>No tasks.</p>"
    where = {n[0]: (n[3], n[4]) for n in nodes}
    width = (max(n[3] for n in nodes) + 1) * CELL_W
    height = (max(n[4] for n in nodes) + 1) * CELL_H
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' class='nbdist-snapshot-graph' "
             f"width='{width}' height='{height}' viewBox='0 0 {width} {height}' "
             f"font-family='sans-serif' font-size='12'>"]
    tasks = snapshot.get("tasks", {})
    for node_id, _, _, col, row in nodes:
        for dep in tasks.get(node_id, {}).get("dep_tasks", ()):
            if dep in where:
                x1, y1 = where[dep][0] * CELL_W + NODE_W, where[dep][1] * CELL_H + NODE_H / 2
                x2, y2 = col * CELL_W, row * CELL_H + NODE_H / 2
                parts.append(f"<line x1='{x1}' y1='{y1}' x2='{x2}' y2='{y2}' "
                             "stroke='#8a949e' stroke-width='1'/>")
    for _, label, state, col, row in nodes:
        x, y = col * CELL_W, row * CELL_H
        text = label if len(label) <= 22 else label[:21] + "…"
        fill = "#1f2933" if state in DARK_TEXT else "#fff"
        parts.append(
            f"<g class='nbdist-snapshot-node' data-task-name='{html.escape(label, True)}' "
            f"data-task-state='{state}'><title>{html.escape(label)}: {state}</title>"
            f"<rect x='{x}' y='{y}' width='{NODE_W}' height='{NODE_H}' "
            f"fill='{COLORS.get(state, '#999')}'/>"
            f"<text x='{x + PAD}' y='{y + 14}' fill='{fill}'>{html.escape(text)}</text></g>")
    parts.append("</svg>")
    return "".join(parts)


def _waits(snapshot: Mapping[str, Any]) -> str:
    rows = []
    waits = [w for w in snapshot.get("waits", {}).values()
             if not _internal(w.get("library_call"))]
    for w in waits[-5:]:
        end = ("timed out" if w.get("timed_out") else "done") if w.get("done") else "waiting"
        rows.append(f"<li>{w['call']}(): {w['ready']} of {w['total']} ready, asked for "
                    f"{w['num_returns']}: {end}</li>")
    return f"<ul class='nbdist-snapshot-waits'>{''.join(rows)}</ul>" if rows else ""


def _runs(snapshot: Mapping[str, Any]) -> str:
    rows = []
    for run in (snapshot.get("runs") or {}).values():
        members = ", ".join(f"{html.escape(m['id'])} {m['status'].lower()}"
                            for m in run["members"].values())
        rows.append(f"<li>{html.escape(run['library'])} {html.escape(run['name'])}: "
                    f"{members}</li>")
    return f"<ul class='nbdist-snapshot-runs'>{''.join(rows)}</ul>" if rows else ""


def snapshot_html(snapshot: Mapping[str, Any], show_internal: bool = False) -> str:
    """The static form of a snapshot (see the module docstring)."""
    t = snapshot.get("totals", {})
    states = ", ".join(f"{t.get(s, 0)} {s}" for s in COLORS if t.get(s))
    head = (f"<b>nbdist</b> — snapshot (not live): {t.get('tasks', 0)} tasks"
            f"{' (' + states + ')' if states else ''}, {t.get('objects', 0)} objects")
    shown = len(graph_nodes(snapshot, show_internal))
    cut = (f"<p>The first {MAX_NODES} nodes are drawn.</p>" if shown >= MAX_NODES else "")
    return (f"<div class='nbdist-snapshot' style='font-family:sans-serif;font-size:13px'>"
            f"<div class='nbdist-snapshot-summary'>{head}</div>"
            f"<div style='overflow:auto;max-height:480px'>{graph_svg(snapshot, show_internal)}"
            f"</div>{cut}{_runs(snapshot)}{_waits(snapshot)}</div>")

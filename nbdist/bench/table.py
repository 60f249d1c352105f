"""The table of `nbdist microbenchmark`: its rows (figures and goals), the median run per
figure, ratios, and the Markdown it prints (the parent process only; the scenario children never
load this)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nbdist.bench.microbenchmark import Run


@dataclass(frozen=True)
class Metric:
    """One row of the table: a figure of a scenario's result and its goal."""

    scenario: str
    key: str
    label: str
    unit: str
    higher_is_better: bool
    target: str
    min_ratio: float | None = None
    bound: float | None = None
    flag: str | None = None


METRICS = (
    Metric("cold_start", "cold_start_s", "cold start → first result", "s", False,
           "≥ 8× faster", min_ratio=8),
    Metric("parallel_rounds", "first_round_s", "2 × 0.5 s sleepers, first round after init",
           "s", False, "≥ 0.9× (as soon as Ray)", min_ratio=0.9),
    Metric("parallel_rounds", "rounds_s", "2 × 0.5 s sleepers, 3 rounds after init", "s",
           False, "≥ 0.9× (as soon as Ray)", min_ratio=0.9),
    Metric("sync_round_trip", "calls_per_s", "sync task round trip", "/s", True,
           "≥ 4×", min_ratio=4),
    Metric("async_throughput", "tasks_per_s", "async tasks (10k empty)", "/s", True,
           "≥ 4×", min_ratio=4),
    Metric("chain", "seconds", "chain of 1,000 dependent tasks", "s", False,
           "≥ 3× faster", min_ratio=3),
    Metric("tree_reduce", "seconds", "tree reduce, 1,024 leaves", "s", False,
           "≥ 3× faster", min_ratio=3),
    Metric("actor_calls", "sync_calls_per_s", "actor calls, sync", "/s", True,
           "≥ 3×", min_ratio=3),
    Metric("actor_calls", "async_calls_per_s", "actor calls, pipelined (10k)", "/s", True,
           "≥ 3×", min_ratio=3),
    Metric("put_get", "put_gb_per_s", "put 100 MB numpy (best of 5)", "GB/s", True,
           "≥ 2 GB/s", bound=2.0),
    Metric("put_get", "get_ms", "get 100 MB numpy (median of 10)", "ms", False,
           "≤ 1 ms, zero-copy", bound=1.0, flag="zero_copy"),
    Metric("sum_by_ref", "sum_ms", "task summing 100 MB numpy by ref (median of 10)", "ms",
           False, "≥ 1× (as fast as Ray)", min_ratio=1),
    Metric("idle_footprint", "uss_mib", "idle memory, all processes (USS)", "MiB", False,
           "≤ 1/4 of Ray", min_ratio=4),
)


def _representative(runs: Sequence[Run], metric: Metric) -> Run | None:
    """The median run for this figure (the lower middle one when their number is even)."""
    good = sorted((r for r in runs if r.ok and metric.key in r.result),
                  key=lambda r: float(r.result[metric.key]))
    return good[(len(good) - 1) // 2] if good else None


def format_value(metric: Metric, result: dict[str, Any]) -> str:
    v = float(result[metric.key])
    if metric.unit == "s":
        text = f"{v:.2f} s" if v >= 1 else f"{v:.3f} s"
    elif metric.unit == "/s":
        text = f"{v:,.0f}/s"
    elif metric.unit == "GB/s":
        text = f"{v:.2f} GB/s"
    elif metric.unit == "ms":
        text = f"{v:.3f} ms" if v < 10 else f"{v:.1f} ms"
    else:
        text = f"{v:.0f} {metric.unit}"
    if metric.flag == "zero_copy":
        text += ", zero-copy" if result.get("zero_copy") else ", copied"
    if "procs" in result and metric.unit == "MiB":
        text += f", {result['procs']} procs"
    return text


def _ratio(metric: Metric, ours: float | None, theirs: float | None) -> float | None:
    if ours is None or theirs is None or ours <= 0 or theirs <= 0:
        return None
    return ours / theirs if metric.higher_is_better else theirs / ours


def _met(metric: Metric, ours: Run | None, ratio: float | None) -> bool | None:
    if metric.min_ratio is not None:
        return None if ratio is None else ratio >= metric.min_ratio
    if ours is None or metric.bound is None:
        return None
    v = float(ours.result[metric.key])
    ok = v >= metric.bound if metric.higher_is_better else v <= metric.bound
    return ok and (metric.flag is None or bool(ours.result.get(metric.flag)))


def _failure(runs: Sequence[Run]) -> str:
    return "TIMEOUT" if any(r.error.startswith("timed out") for r in runs) else "FAILED"


def build_rows(metrics: Sequence[Metric], runs: dict[str, dict[str, list[Run]]],
               backends: Sequence[str]) -> list[dict[str, Any]]:
    """One dict per metric: each backend's figure and cell text, the ratio, whether met."""
    rows = []
    for metric in metrics:
        row: dict[str, Any] = {"metric": metric.key, "scenario": metric.scenario,
                               "label": metric.label, "unit": metric.unit,
                               "target": metric.target}
        picked: dict[str, Run | None] = {}
        for backend in backends:
            scenario_runs = runs[backend].get(metric.scenario, [])
            rep = picked[backend] = _representative(scenario_runs, metric)
            row[backend] = float(rep.result[metric.key]) if rep else None
            row[f"{backend}_text"] = (format_value(metric, rep.result) if rep
                                      else _failure(scenario_runs))
        ratio = (_ratio(metric, row[backends[0]], row[backends[-1]])
                 if len(backends) > 1 else None)
        row["ratio"] = ratio
        row["met"] = _met(metric, picked.get(backends[0]), ratio)
        rows.append(row)
    return rows


def format_table(rows: Sequence[dict[str, Any]], backends: Sequence[str]) -> str:
    """A Markdown table, so the output can be pasted into docs/benchmarks.md as is."""
    compare = len(backends) > 1
    header = ["scenario", *backends] + (["ratio"] if compare else []) + ["target", "met"]
    lines = [header]
    for row in rows:
        cells = [row["label"], *(row[f"{b}_text"] for b in backends)]
        if compare:
            cells.append("–" if row["ratio"] is None else f"{row['ratio']:.2f}×")
        met = {True: "met", False: "NOT met", None: "n/a"}[row["met"]]
        lines.append([*cells, row["target"], met])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    lines.insert(1, ["-" * w for w in widths])
    return "\n".join("| " + " | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True))
                     + " |" for line in lines)

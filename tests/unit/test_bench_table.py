"""The microbenchmark's table: the median run per figure, ratios both ways, goals, failures."""

from __future__ import annotations

from nbdist.bench.microbenchmark import Run
from nbdist.bench.table import METRICS, build_rows, format_table


def _runs(backend: str, scenario: str, values: list[dict]) -> list[Run]:
    return [Run(backend, scenario, ok=True, result=v) for v in values]


def test_rows_take_the_median_run_and_the_ratio_in_nbdists_favour() -> None:
    metrics = [m for m in METRICS if m.scenario in ("actor_calls", "chain")]
    runs = {
        "nbdist": {
            "actor_calls": _runs("nbdist", "actor_calls", [
                {"sync_calls_per_s": 3000, "async_calls_per_s": 15000},
                {"sync_calls_per_s": 3300, "async_calls_per_s": 14000},
                {"sync_calls_per_s": 3600, "async_calls_per_s": 16000}]),
            "chain": _runs("nbdist", "chain", [{"seconds": 0.2}]),
        },
        "ray": {
            "actor_calls": _runs("ray", "actor_calls", [
                {"sync_calls_per_s": 1000, "async_calls_per_s": 2000}]),
            "chain": [Run("ray", "chain", ok=False, error="timed out after 180 s")],
        },
    }
    rows = {r["metric"]: r for r in build_rows(metrics, runs, ["nbdist", "ray"])}
    sync = rows["sync_calls_per_s"]
    assert sync["nbdist"] == 3300 and sync["ratio"] == 3.3 and sync["met"] is True
    assert rows["async_calls_per_s"]["nbdist"] == 15000
    chain = rows["seconds"]
    assert chain["ray"] is None and chain["ray_text"] == "TIMEOUT" and chain["met"] is None
    table = format_table(list(rows.values()), ["nbdist", "ray"])
    assert "| actor calls, sync" in table and "3.30×" in table and "TIMEOUT" in table


def test_a_time_figure_inverts_the_ratio_and_a_bound_is_checked_alone() -> None:
    metrics = [m for m in METRICS if m.key in ("cold_start_s", "put_gb_per_s")]
    runs = {"nbdist": {"cold_start": _runs("nbdist", "cold_start", [{"cold_start_s": 0.5}]),
                       "put_get": _runs("nbdist", "put_get", [{"put_gb_per_s": 1.5}])},
            "ray": {"cold_start": _runs("ray", "cold_start", [{"cold_start_s": 2.0}]),
                    "put_get": _runs("ray", "put_get", [{"put_gb_per_s": 3.0}])}}
    rows = {r["metric"]: r for r in build_rows(metrics, runs, ["nbdist", "ray"])}
    assert rows["cold_start_s"]["ratio"] == 4.0 and rows["cold_start_s"]["met"] is False
    assert rows["put_gb_per_s"]["met"] is False  # 1.5 GB/s is below the 2 GB/s goal

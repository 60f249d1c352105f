"""Ray Tune's progress reporters: ``CLIReporter`` given to ``tune.run`` or to ``RunConfig``
prints a status table of the real trials while the search runs, and once more at its end."""

from __future__ import annotations

from typing import Any

import pytest

from nbdist import tune

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("cluster")]


def quadratic(config: dict[str, Any]) -> None:
    for step in range(3):
        tune.report({"loss": (config["lr"] - 0.3) ** 2 + step, "step": step})


def _tables(out: str) -> list[str]:
    return [block for block in out.split("== Status ==")[1:]]


def test_cli_reporter_prints_the_columns_it_was_given(storage: str,
                                                      capsys: pytest.CaptureFixture) -> None:
    reporter = tune.CLIReporter(metric_columns={"loss": "the loss"}, parameter_columns=["lr"],
                                max_report_frequency=0)
    reporter.add_metric_column("step")
    with pytest.raises(ValueError, match="already shown"):
        reporter.add_metric_column("step")
    analysis = tune.run(quadratic, config={"lr": tune.grid_search([0.1, 0.3, 0.5])},
                        metric="loss", mode="min", storage_path=storage, verbose=0,
                        progress_reporter=reporter)
    tables = _tables(capsys.readouterr().out)
    assert len(tables) >= 2, tables  # while it ran, and the last one
    last = tables[-1]
    assert "Number of trials: 3/3 (3 TERMINATED)" in last, last
    assert "Search done." in last
    header = next(line for line in last.splitlines() if line.startswith("Trial name"))
    assert [c.strip() for c in header.split("|")] == ["Trial name", "status", "lr",
                                                      "the loss", "step"]
    rows = {line.split("|")[0].strip(): [c.strip() for c in line.split("|")]
            for line in last.splitlines() if "| TERMINATED" in line}
    assert set(rows) == {str(t) for t in analysis.trials}
    for trial in analysis.trials:
        row = rows[str(trial)]
        assert float(row[2]) == trial.config["lr"]
        assert float(row[3]) == pytest.approx(trial.last_result["loss"], rel=1e-4)
        assert row[4] == "2"
    best = analysis.get_best_trial("loss", "min")
    assert f"Current best trial: {best}" in last
    assert "Trial " not in capsys.readouterr().out  # no one-line status beside the table


def test_a_reporter_in_run_config_replaces_the_one_line_status(
        storage: str, capsys: pytest.CaptureFixture) -> None:
    calls: list[tuple[int, bool]] = []

    class Counting(tune.ProgressReporter):
        def should_report(self, trials: list[Any], done: bool = False) -> bool:
            return True

        def report(self, trials: list[Any], done: bool, *sys_info: str) -> None:
            calls.append((len(trials), done))

    tuner = tune.Tuner(quadratic, param_space={"lr": tune.grid_search([0.1, 0.2])},
                       run_config=tune.RunConfig(storage_path=storage, verbose=1,
                                                 progress_reporter=Counting()))
    grid = tuner.fit()
    assert len(grid) == 2 and calls and calls[-1] == (2, True)
    assert "RUNNING" not in capsys.readouterr().out


def test_a_reporter_without_the_interface_is_refused(storage: str) -> None:
    with pytest.raises(TypeError, match="should_report"):
        tune.Tuner(quadratic, param_space={"lr": 0.1},
                   run_config=tune.RunConfig(storage_path=storage,
                                             progress_reporter=object())).fit()

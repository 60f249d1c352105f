"""breakpoint() in a task on backend="ray" says which debugger attaches, then stops as Ray's
hook would (no Ray started: the hook under ``PYTHONBREAKPOINT`` here is a plain function)."""

from __future__ import annotations

import sys

import pytest

from nbdist.backends.ray import breakpoints


def test_the_hint_names_rays_debuggers_and_what_needs_nbdists_engine() -> None:
    default = breakpoints.message("f", 12, "1")
    assert "task 'f' (pid 12) stopped at breakpoint() on backend='ray'" in default
    assert "Ray Distributed Debugger" in default and "RAY_DEBUG=legacy" in default
    assert "`ray debug`" in default and "%nbdist debug" in default
    legacy = breakpoints.message("f", 12, "legacy")
    assert "run `ray debug` in a terminal" in legacy and "VS Code" not in legacy


def test_the_hook_writes_the_hint_then_calls_the_hook_pythonbreakpoint_names(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PYTHONBREAKPOINT", "builtins.len")  # Ray sets its own here
    monkeypatch.delenv("RAY_DEBUG", raising=False)
    monkeypatch.setattr(sys, "breakpointhook", sys.breakpointhook)  # restored after the test
    breakpoints.install(lambda: "train_step")
    assert sys.breakpointhook is breakpoints.hook
    assert breakpoint("abc") == 3  # type: ignore[func-returns-value]
    err = capsys.readouterr().err
    assert "task 'train_step'" in err and "Ray Distributed Debugger" in err


def test_pythonbreakpoint_0_keeps_breakpoints_off_and_silent(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PYTHONBREAKPOINT", "0")
    assert breakpoints.hook() is None
    assert capsys.readouterr().err == ""

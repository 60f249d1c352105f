"""docs/ray-compatibility.md's table is what ``import nbdist as ray`` really offers.

Every row of the page's tables names a Ray API (``ray.util.ActorPool``,
``ray.get_runtime_context().get_task_id``, ``task option num_cpus``, ``ray stop --force``) and
says ``yes``, ``accepted`` (taken, no effect) or ``no``. Each name is tried here the way a Ray
user would reach it, so a name that disappears fails its ``yes`` row, and a name that appears
fails its ``no`` row until the table says so: the table cannot go stale silently.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

import nbdist
from nbdist import cli

PAGE = Path(__file__).resolve().parents[2] / "docs" / "ray-compatibility.md"
ROW = re.compile(r"^\| `([^`]+)` \| (yes|accepted|no) \|")


def _rows() -> list[tuple[str, str]]:
    rows = [m.groups() for line in PAGE.read_text().splitlines() if (m := ROW.match(line))]
    assert len(rows) > 300, "the compatibility table went missing from docs/ray-compatibility.md"
    return rows  # type: ignore[return-value]


def _resolve(path: str) -> Any:
    """``ray.a.b.c`` as ``nbdist.a.b.c``: the longest importable module, then attributes."""
    parts = ["nbdist", *path.split(".")[1:]]
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(path)


@nbdist.remote
def _task() -> None:
    return None


@nbdist.remote
class _Actor:
    pass


def _option_known(kind: str, name: str) -> bool:
    """Whether ``.options(name=...)`` knows the option: a wrong value may still fail, but
    not as an unknown name."""
    target = _task if kind == "task" else _Actor
    try:
        target.options(**{name: object()})
    except (ValueError, TypeError, AttributeError) as exc:
        return "Unknown option" not in str(exc)
    return True


class _Parsed(Exception):
    pass


def _cli_accepts(command: str, option: str, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether ``nbdist <command>`` parses ``option`` (alone or with a value). Parsing is
    stopped right after the command's own parser ran, so nothing starts or stops."""

    def parse_only(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None
                   ) -> Any:
        raise _Parsed(self.parse_known_args(args, namespace)[1])

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_only)
    run = {"start": cli._start, "stop": cli._stop, "status": cli._status}[command]
    base = ["--head"] if command == "start" and option not in ("--head", "--address") else []
    for argv in (base + [option], base + [option, "1"]):
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                run(argv)
        except _Parsed as parsed:
            if not parsed.args[0]:
                return True
        except SystemExit:
            pass
    return False


def _offered(name: str, monkeypatch: pytest.MonkeyPatch) -> bool:
    if name.startswith(("task option ", "actor option ")):
        kind, _, option = name.split(" ")
        return _option_known(kind, option)
    if cli_row := re.fullmatch(r"ray (start|stop|status) (\S+)", name):
        return _cli_accepts(cli_row[1], cli_row[2], monkeypatch)
    if name.startswith("ray.get_runtime_context()."):
        return hasattr(type(nbdist.get_runtime_context()), name.rsplit(".", 1)[1])
    try:
        _resolve(name)
    except (ImportError, AttributeError):
        return False
    return True


def test_every_name_marked_supported_is_there(monkeypatch: pytest.MonkeyPatch) -> None:
    missing = [name for name, status in _rows()
               if status != "no" and not _offered(name, monkeypatch)]
    assert not missing, f"marked supported in {PAGE.name} but missing from nbdist: {missing}"


def test_every_name_marked_unsupported_is_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    present = [name for name, status in _rows()
               if status == "no" and _offered(name, monkeypatch)]
    assert not present, (f"nbdist now has these; mark them supported in {PAGE.name}: "
                         f"{present}")


def test_accepted_options_are_the_ones_nbdist_ignores() -> None:
    from nbdist.driver import options

    for name, status in _rows():
        if name.startswith(("task option ", "actor option ")):
            kind, _, option = name.split(" ")
            ignored = options.TASK_IGNORED if kind == "task" else options.ACTOR_IGNORED
            assert (status == "accepted") == (option in ignored), name

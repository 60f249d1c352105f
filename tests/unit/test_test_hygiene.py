"""Tests wait for conditions, never for the clock: a guard over the test sources themselves.

Every ``*.py`` under ``tests/`` is read with ``ast``, and so is the Python held in its string
literals (driver scripts, kernel cells), which runs too. Two rules:

- No ``while`` loop that reads the clock (``time.monotonic()``, ``time.time()``,
  ``time.perf_counter()``): that is a hand-rolled deadline. ``tests/polling.py`` holds the one
  such loop, behind ``poll``, ``until``, ``retrying`` and ``poll_settled``.
- No ``time.sleep`` / ``asyncio.sleep`` outside the body of a remote function or actor (there
  it is the work the task does; remote means decorated with ``remote`` or passed to a
  ``remote(...)`` call in the same code, as in ``api.remote(span)``) unless its line, or a comment line right above it, says why
  it is not a wait for a condition: ``# deliberate sleep: <why>``.
"""

from __future__ import annotations

import ast
import re
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

EXEMPT = {
    "polling.py": "the one polling loop every test uses",
    "unit/test_test_hygiene.py": "its own examples of what it forbids",
}
# Pending: files still being moved to polling.py by their owners; each is listed only while
# it breaks a rule. Remove an entry once its file passes.
PENDING = {
    "integration/test_cluster_cli.py",  # pending
}

MARKER = re.compile(r"#\s*deliberate sleep:\s*\S")
CLOCKS = {"monotonic", "monotonic_ns", "time", "time_ns", "perf_counter", "perf_counter_ns"}
BARE_CLOCKS = CLOCKS - {"time", "time_ns"}  # a bare ``time()`` may be anything
SLEEP_MODULES = {"time", "asyncio"}
REMOTE_CELL = "%%remote"


def _is_clock(call: ast.Call) -> bool:
    f = call.func
    if isinstance(f, ast.Attribute):
        return isinstance(f.value, ast.Name) and f.value.id == "time" and f.attr in CLOCKS
    return isinstance(f, ast.Name) and f.id in BARE_CLOCKS


def _is_sleep(call: ast.Call) -> bool:
    f = call.func
    if isinstance(f, ast.Attribute):
        return (f.attr == "sleep" and isinstance(f.value, ast.Name)
                and f.value.id in SLEEP_MODULES)
    return isinstance(f, ast.Name) and f.id == "sleep"


def _names_remote(target: ast.expr) -> bool:
    return (isinstance(target, ast.Attribute) and target.attr == "remote") or \
        (isinstance(target, ast.Name) and target.id == "remote")


def _is_remote(decorator: ast.expr) -> bool:
    return _names_remote(decorator.func if isinstance(decorator, ast.Call) else decorator)


def _made_remote(tree: ast.AST) -> set[str]:
    """Names passed to a ``remote(...)`` call: ``api.remote(span)`` makes ``span`` remote."""
    return {call.args[0].id for call in ast.walk(tree)
            if isinstance(call, ast.Call) and _names_remote(call.func) and call.args
            and isinstance(call.args[0], ast.Name)}


class _Checker(ast.NodeVisitor):
    def __init__(self, lines: list[str], remote: bool, made_remote: set[str]) -> None:
        self.lines = lines
        self.remote_depth = int(remote)
        self.made_remote = made_remote
        self.found: list[tuple[int, str]] = []

    def _scope(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        remote = node.name in self.made_remote or any(_is_remote(d)
                                                      for d in node.decorator_list)
        self.remote_depth += remote
        self.generic_visit(node)
        self.remote_depth -= remote

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scope

    def visit_While(self, node: ast.While) -> None:
        if any(isinstance(n, ast.Call) and _is_clock(n) for n in ast.walk(node)):
            self.found.append((node.lineno, "a while loop against the clock: use polling.py"))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if _is_sleep(node) and not self.remote_depth and not self._marked(node.lineno):
            self.found.append((node.lineno, "a sleep outside a remote function: wait for the "
                                            "condition, or say '# deliberate sleep: <why>'"))
        self.generic_visit(node)

    def _marked(self, lineno: int) -> bool:
        line = self.lines[lineno - 1]
        above = self.lines[lineno - 2].strip() if lineno >= 2 else ""
        return bool(MARKER.search(line) or (above.startswith("#") and MARKER.search(above)))


def _check(source: str) -> list[tuple[int, str]]:
    """Rule breaks in one piece of code: (line, what)."""
    remote = source.lstrip().startswith(REMOTE_CELL)
    with warnings.catch_warnings():  # a string's odd escapes are not this guard's business
        warnings.simplefilter("ignore", SyntaxWarning)
        try:
            tree = ast.parse(source)
        except SyntaxError:
            # IPython magics are no Python: blank them, keeping the line numbers (only when the
            # code does not parse as it is: a docstring's line may start with "%" too).
            source = "\n".join("" if ln.lstrip().startswith("%") else ln
                               for ln in source.split("\n"))
            tree = ast.parse(source)
    checker = _Checker(source.split("\n"), remote, _made_remote(tree))
    checker.visit(tree)
    return checker.found


def _string_code(node: ast.Constant | ast.JoinedStr) -> str:
    if isinstance(node, ast.Constant):
        return str(node.value)
    return "".join(str(v.value) if isinstance(v, ast.Constant) else "0" for v in node.values)


def _embedded(tree: ast.AST) -> Iterator[tuple[int, int, str]]:
    """(first line, last line, text) of each string literal that may hold code; the parts of
    an f-string only as the whole."""
    parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr) or (isinstance(n, ast.Constant)
                                            and isinstance(n.value, str) and id(n) not in parts):
            yield n.lineno, n.end_lineno or n.lineno, _string_code(n)


def violations(path: Path) -> list[str]:
    """Every rule break in one file, as ``path:line: what``."""
    source = path.read_text()
    tree = ast.parse(source, str(path))
    found = _check(source)
    for start, end, text in _embedded(tree):
        code = textwrap.dedent(text)
        try:
            breaks = _check(code)
        except SyntaxError:
            if re.search(r"\btime\.(sleep|monotonic|perf_counter)\(|\btime\.time\(", code):
                found.append((start, "code in a string this guard cannot parse uses the "
                                     "clock: make it parse"))
            continue
        # A line of the string is a line of the file, unless "\\n" escapes joined them.
        found += [(min(start + line - 1, end), what) for line, what in breaks]
    name = path.relative_to(TESTS) if path.is_relative_to(TESTS) else path
    return [f"tests/{name}:{line}: {what}" for line, what in sorted(set(found))]


def _test_sources() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py")
                  if "node_modules" not in p.parts and not any(
                      part.startswith(".") for part in p.relative_to(TESTS).parts))


def test_no_test_waits_on_the_clock() -> None:
    skipped = EXEMPT.keys() | PENDING
    found = [v for p in _test_sources() if p.relative_to(TESTS).as_posix() not in skipped
             for v in violations(p)]
    assert not found, "tests must wait on conditions (tests/polling.py):\n" + "\n".join(found)


def test_every_exemption_names_an_existing_file() -> None:
    for name in EXEMPT.keys() | PENDING:
        assert (TESTS / name).is_file(), f"tests/{name} is exempted but does not exist"


# ----------------------------------------------------------------- the guard's own examples
def _one(tmp_path: Path, code: str) -> list[str]:
    path = tmp_path / "test_sample.py"
    path.write_text(textwrap.dedent(code))
    return violations(path)


def test_a_deadline_loop_is_found(tmp_path: Path) -> None:
    found = _one(tmp_path, """
        import time
        def test_x(ready):
            deadline = time.monotonic() + 5
            while not ready():
                assert time.monotonic() < deadline
    """)
    assert len(found) == 1 and ":5: a while loop against the clock" in found[0], found


def test_a_sleep_as_synchronisation_is_found_unless_it_says_why(tmp_path: Path) -> None:
    found = _one(tmp_path, """
        import time
        def test_x():
            time.sleep(0.5)
            time.sleep(0.05)  # deliberate sleep: the sampling period
            # deliberate sleep: a gap the protocol must tolerate
            time.sleep(0.1)
    """)
    assert len(found) == 1 and ":4: a sleep outside a remote function" in found[0], found


def test_sleeps_in_remote_functions_and_actors_are_work(tmp_path: Path) -> None:
    assert _one(tmp_path, """
        import asyncio, time
        import nbdist
        @nbdist.remote(num_cpus=1)
        def work(s):
            time.sleep(s)
        @nbdist.remote
        class Actor:
            async def nap(self, s):
                await asyncio.sleep(s)
        def later(s):
            time.sleep(s)
        def test_x(api):
            api.get(api.remote(later).remote(1))
    """) == []


def test_code_in_driver_strings_and_kernel_cells_is_checked(tmp_path: Path) -> None:
    found = _one(tmp_path, '''
        def test_x(cli, marker):
            cli.python(f"""
                import os, time
                while not os.path.exists({marker!r}):
                    time.sleep(0.02)
            """)
            kernel_cell = "import time\\ntime.sleep(1)\\nprint(done)"
            remote_cell = "%%remote\\nimport time\\ndef f():\\n    time.sleep(1)\\n"
    ''')
    assert [f.split(": ", 1)[1] for f in found] == [
        "a sleep outside a remote function: wait for the condition, or say "
        "'# deliberate sleep: <why>'"] * 2, found
    assert ":6:" in found[0] and ":8:" in found[1], found


def test_a_while_loop_without_the_clock_is_fine(tmp_path: Path) -> None:
    assert _one(tmp_path, """
        def drain(todo):
            while todo:
                todo.pop()
    """) == []


def test_test_modules_have_names_of_their_own() -> None:
    """The test folders are not packages: pytest imports each test module by its file name,
    so two files of one name in two folders stop the whole run at collection."""
    seen: dict[str, Path] = {}
    twins = []
    for path in sorted(TESTS.rglob("test_*.py")):
        if path.name in seen:
            twins.append(f"{seen[path.name].relative_to(TESTS)} and {path.relative_to(TESTS)}")
        seen.setdefault(path.name, path)
    assert not twins, "test files share a name: " + "; ".join(twins)

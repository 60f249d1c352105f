"""Layering of the UI (layer L4): modules under nbdist/jupyter read the engine only through the
public API and the event stream, never its internals (DESIGN.md, "Layers")."""

from __future__ import annotations

import ast
from pathlib import Path

import nbdist

JUPYTER = Path(nbdist.__file__).parent / "jupyter"
# What nbdist/jupyter may import of nbdist (besides its own modules): the public API, which
# includes Ray's ray.util modules (util.metrics, util.state, ...) and nbdist.cluster (the
# documented calls that start and attach SSH clusters: ssh(), attach(), down()), and the event
# stream.
PUBLIC = frozenset(("nbdist", "nbdist.events", "nbdist.exceptions", "nbdist.util",
                    "nbdist.cluster"))
PUBLIC_UTIL = ("nbdist.util.metrics", "nbdist.util.state", "nbdist.util.placement_group",
               "nbdist.util.scheduling_strategies", "nbdist.util.pdb", "nbdist.util.why")


def engine_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of an nbdist module in ``path`` (those inside functions
    too), relative ones resolved; ``from nbdist import x`` counts as importing ``nbdist.x``
    when ``x`` is a module."""
    package = "nbdist.jupyter"
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            for alias in node.names:
                name = f"{module}.{alias.name}"
                if _is_module(name):
                    found.append((node.lineno, name))
    return [(line, m) for line, m in found if m == "nbdist" or m.startswith("nbdist.")]


def _is_module(name: str) -> bool:
    root = Path(nbdist.__file__).parent.parent
    rel = Path(*name.split("."))
    return (root / rel).with_suffix(".py").exists() or (root / rel / "__init__.py").exists()


def allowed(module: str) -> bool:
    return module in PUBLIC or module in PUBLIC_UTIL or module == "nbdist.jupyter" or (
        module.startswith("nbdist.jupyter."))


def test_the_ui_imports_only_the_public_api_and_the_event_stream() -> None:
    offending = [f"{path.relative_to(JUPYTER.parent.parent)}:{line}: {module}"
                 for path in sorted(JUPYTER.rglob("*.py"))
                 for line, module in engine_imports(path) if not allowed(module)]
    assert not offending, (
        "nbdist/jupyter reads the engine only through nbdist, nbdist.events, "
        "nbdist.exceptions and nbdist.util's public modules; these imports reach past them:\n" + "\n".join(offending))


def test_the_guard_sees_imports_inside_functions_and_relative_ones(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import nbdist\nfrom nbdist import events\nfrom nbdist.driver import runtime\n"
                      "def f():\n    from nbdist.events.tracing import timeline\n"
                      "    from ..events import tally\n    from . import model\n")
    found = [m for _, m in engine_imports(sample) if not allowed(m)]
    assert found == ["nbdist.driver", "nbdist.driver.runtime", "nbdist.events.tracing",
                     "nbdist.events.tally"]


def test_a_driver_does_not_load_the_node_daemons_scheduler() -> None:
    """`import nbdist` (every driver, every worker) needs the wire and the driver layers, not
    the node daemon's scheduler: loading it would only lengthen every process's start-up."""
    import subprocess
    import sys
    code = ("import sys, nbdist; "
            "print(sorted(m for m in sys.modules if m.startswith(('nbdist.scheduler', "
            "'nbdist.daemons.node', 'nbdist.daemons.head'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]", f"import nbdist loaded {out}"

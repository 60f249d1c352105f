"""No import cycles in nbdist: the modules form a DAG, so each can be read, tested and loaded
from the bottom up, and the public API reaches its engines through one seam
(`nbdist.backends.base`) rather than through modules that import each other back.

Every import counts, at module level and inside functions (a lazy import hides a cycle, it
does not remove it); relative imports are resolved; ``if TYPE_CHECKING:`` blocks are ignored
(they never run). Two edges are sanctioned: ``nbdist.load_ipython_extension``, IPython's entry
point, and ``nbdist.show``, the inline view's, import the notebook layer that sits on top of the
public API.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbdist

ROOT = Path(nbdist.__file__).parent
# (module, function) whose imports are not edges: the notebook layer's entry point.
EXEMPT_FUNCTIONS = frozenset({("nbdist", "load_ipython_extension"), ("nbdist", "show")})


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_pkg: bool,
             known: set[str]) -> list[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            parts = module.split(".") if is_pkg else module.split(".")[:-1]
            base_parts = parts[:len(parts) - node.level + 1]
            base = ".".join(base_parts + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                 for a in node.names]
    out = []
    for name in names:
        while name and name not in known:  # ``import a.b.c`` of a name inside a module
            name = name.rpartition(".")[0]
        if name and name != module:
            out.append(name)
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the modules of ``root``'s package it imports (anywhere but TYPE_CHECKING)."""
    paths = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    known = set(paths)
    graph: dict[str, set[str]] = {m: set() for m in paths}
    for module, path in paths.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))

        def visit(node: ast.AST, module: str = module, is_pkg: bool = is_pkg) -> None:
            for child in ast.iter_child_nodes(node):
                if _is_type_checking(child):
                    for sub in child.orelse:  # the else branch does run
                        visit(ast.Module(body=[sub], type_ignores=[]))
                    continue
                if (isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and (module, child.name) in EXEMPT_FUNCTIONS):
                    continue
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    graph[module].update(_targets(child, module, is_pkg, known))
                visit(child)

        visit(tree)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, edges = work[-1]
            for w in edges:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def describe(component: list[str], graph: dict[str, set[str]]) -> str:
    members = set(component)
    edges = [f"    {m} -> {t}" for m in component for t in sorted(graph[m] & members)]
    return f"  {', '.join(component)}\n" + "\n".join(edges)


def test_nbdist_has_no_import_cycles() -> None:
    graph = import_graph(ROOT)
    found = cycles(graph)
    assert not found, "import cycles in nbdist (each group imports itself back):\n" + "\n".join(
        describe(c, graph) for c in found)


# ----------------------------------------------------------------- the guard's own examples
def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_cycle_through_a_function_level_relative_import_is_found(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "__init__.py": "",
        "a.py": "from . import b\n",
        "b.py": "def f():\n    from .sub import c\n",
        "sub/__init__.py": "",
        "sub/c.py": "from ..a import thing\n",
    })
    assert cycles(import_graph(root)) == [["pkg.a", "pkg.b", "pkg.sub.c"]]


def test_type_checking_imports_are_not_edges(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "__init__.py": "",
        "a.py": "from . import b\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n",
    })
    assert cycles(import_graph(root)) == []


def test_only_the_named_entry_point_is_exempt(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "__init__.py": "from . import a\n",
        "a.py": "def load_ipython_extension():\n    import pkg\n",
    })
    assert cycles(import_graph(root)) == [["pkg", "pkg.a"]]

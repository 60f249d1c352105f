"""`make docs`: every teaching notebook executed and written as an HTML page with its outputs,
readable without a network (docs/build_course.py)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]

# What the lab template still links to a CDN; none of it is needed to read a page: MathJax
# typesets formulas (the course has none) and require.js loads the ipywidgets renderer.
OPTIONAL = ("https://cdnjs.cloudflare.com/ajax/libs/mathjax/",
            "https://cdnjs.cloudflare.com/ajax/libs/require.js/", "https://unpkg.com/")


def _builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_course", ROOT / "docs" / "build_course.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_docs_runs_the_course_builder() -> None:
    dry = subprocess.run(["make", "-n", "docs"], cwd=ROOT, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    assert ".venv/bin/python docs/build_course.py" in dry.stdout


def test_a_rendered_notebook_has_its_outputs_and_needs_no_cdn(tmp_path: Path) -> None:
    build = _builder()
    notebook = ROOT / "notebooks" / "00-quickstart.ipynb"
    page, took = build.render(notebook, tmp_path)
    html = page.read_text(encoding="utf-8")
    # The outputs of the run, not only the code: the actor's counts and the zero-copy array.
    assert "[1, 2, 3, 4, 5]" in html
    assert "(np.float64(1000000.0), False)" in html
    external = re.findall(r"<(?:script|link)\b[^>]*?(?:src|href)=\"(https?://[^\"]+)\"", html)
    assert [url for url in external if not url.startswith(OPTIONAL)] == []
    assert "<style" in html  # the template's styles travel inside the page
    index = build.write_index(tmp_path, {notebook.stem: took}).read_text(encoding="utf-8")
    assert '<a href="00-quickstart.html">00-quickstart</a>: nbdist quick start <small>' in index

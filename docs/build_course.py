"""Build the rendered course: run each teaching notebook and write it as HTML with its outputs.

``make docs`` runs this with the venv's Python: every notebook in ``notebooks/`` is executed
top to bottom in a fresh ``python3`` kernel (as ``tests/notebooks`` run them) and written to
``docs/course/<name>.html``, with ``docs/course/index.html`` listing them in course order with
the time each took. ``docs/course/`` is build output (ignored by git).

The pages use nbconvert's ``lab`` template with images embedded (``embed_images``), so they
read offline: styles are inline, plots are PNG/SVG or bokeh with its code inline. What a page
would fetch from a CDN is not essential to reading it: MathJax (the notebooks have no maths),
require.js and the ipywidgets renderer, which draws widgets (progress bars, Tune's live views)
from the state saved in the page when there is a network and leaves them out when there is none.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbconvert import HTMLExporter

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
OUT = ROOT / "docs" / "course"


def render(notebook: Path, out_dir: Path, timeout: int = 600) -> tuple[Path, float]:
    """Execute ``notebook`` (in its own folder) and write ``out_dir/<stem>.html``; the page's
    path and how long the run took, kernel start included."""
    nb = nbformat.read(notebook, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, kernel_name="python3", timeout=timeout,
                   resources={"metadata": {"path": str(notebook.parent)}}).execute()
    took = time.perf_counter() - start
    body, _ = HTMLExporter(template_name="lab", embed_images=True).from_notebook_node(
        nb, resources={"metadata": {"name": notebook.stem}})
    out_dir.mkdir(parents=True, exist_ok=True)
    page = out_dir / f"{notebook.stem}.html"
    page.write_text(body, encoding="utf-8")
    return page, took


def _title(notebook: Path) -> str:
    """The notebook's first heading without its course number ("01 · The cluster")."""
    nb = nbformat.read(notebook, as_version=4)
    first = nb.cells[0].source.splitlines()[0] if nb.cells else notebook.stem
    return re.sub(r"^#+\s*(\d+\s*·\s*)?", "", first).replace("`", "").strip()


def write_index(out_dir: Path, took: dict[str, float]) -> Path:
    """``index.html``: every page in ``out_dir`` in course order, with its title and the time
    its last build took (``took``: seconds by notebook stem, kept in ``times.json`` so that
    rendering one notebook keeps the others in the index)."""
    times_file = out_dir / "times.json"
    times = json.loads(times_file.read_text()) if times_file.exists() else {}
    times.update(took)
    times_file.write_text(json.dumps(times, indent=1, sort_keys=True))
    rows = []
    for page in sorted(out_dir.glob("*.html")):
        notebook = NOTEBOOKS / f"{page.stem}.ipynb"
        if page.name == "index.html" or not notebook.exists():
            continue
        ran = f" <small>(ran in {times[page.stem]:.0f} s)</small>" if page.stem in times else ""
        rows.append(f'<li><a href="{html.escape(page.name)}">{html.escape(page.stem)}</a>: '
                    f"{html.escape(_title(notebook))}{ran}</li>")
    index = out_dir / "index.html"
    index.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'><title>nbdist course"
                     "</title></head><body><h1>The nbdist course</h1><p>Each notebook as it "
                     "ran when its page was built (<code>make docs</code>); "
                     "<code>docs/course.md</code> says what each teaches.</p>"
                     f"<ul>{''.join(rows)}</ul></body></html>", encoding="utf-8")
    return index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="notebooks to render (default: every notebook in notebooks/)")
    parser.add_argument("--out", type=Path, default=OUT, help="output folder (docs/course)")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or sorted(NOTEBOOKS.glob("*.ipynb"))
    took: dict[str, float] = {}
    failed = []
    for notebook in notebooks:
        # One broken notebook should not cost the reader the others' pages.
        try:
            page, took[notebook.stem] = render(notebook.resolve(), args.out)
        except Exception as exc:  # noqa: BLE001 - reported, and the build fails at the end
            print(f"{notebook.name}: FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
            failed.append(notebook.name)
            continue
        print(f"{notebook.name}: {took[notebook.stem]:.0f} s -> {page}", flush=True)
    print(f"index: {write_index(args.out, took)}")
    if failed:
        print(f"not rendered: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

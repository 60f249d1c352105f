"""A real JupyterLab server and Debian's Chromium, for the panel's browser tests and benchmark.

``LabServer.start(root)`` runs ``python -m jupyterlab`` from this venv (so the prebuilt panel
installed with nbdist is what loads) on a free loopback port with a random token, in a temp
directory that also holds its settings, workspaces and runtime files, so nothing of the user's
own JupyterLab setup leaks in. ``stop()`` asks the server to shut down (which ends its kernels)
and kills the process group if it does not.

``launch_chromium(playwright)`` starts /usr/bin/chromium headless with a fresh profile.

``NotebookPage`` drives a notebook the way a user does: it adds code cells to the open notebook
and runs them with JupyterLab's own commands (so each run is a real execute request from a
cell), and opens the panel through the command palette.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from polling import until

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
START_TIMEOUT = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LabServer:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, token: str, root: Path,
                 log: Path) -> None:
        self.proc, self.port, self.token, self.root, self.log = proc, port, token, root, log
        self.url = f"http://127.0.0.1:{port}"

    @classmethod
    def start(cls, root: Path) -> LabServer:
        home = root / ".lab"
        settings = home / "settings" / "@jupyterlab" / "apputils-extension"
        settings.mkdir(parents=True)
        # The news and update checks need the internet and cover the page with a pop-up.
        (settings / "notification.jupyterlab-settings").write_text(
            json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
                   JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
                   JUPYTER_RUNTIME_DIR=str(home / "runtime"))
        port, token = free_port(), secrets.token_hex(16)
        log = home / "server.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
                 f"--port={port}", "--ip=127.0.0.1", f"--IdentityProvider.token={token}",
                 f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
                 "--ServerApp.port_retries=0"],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        server = cls(proc, port, token, root, log)
        try:
            server._wait_ready()
        except BaseException:
            server.stop()
            raise
        return server

    def _wait_ready(self) -> None:
        def ready() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited ({self.proc.returncode}):\n"
                                   + self.log.read_text()[-3000:])
            try:
                with urllib.request.urlopen(f"{self.url}/api/status?token={self.token}",
                                            timeout=2) as reply:
                    return reply.status == 200
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                return False

        if not until(ready, timeout=START_TIMEOUT, interval=0.1):
            raise RuntimeError(f"JupyterLab not ready after {START_TIMEOUT} s:\n"
                               + self.log.read_text()[-3000:])

    def api(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{path}?token={self.token}", data=data,
                                         method=method)
        with urllib.request.urlopen(request, timeout=10) as reply:
            text = reply.read()
        return json.loads(text) if text else None

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.api("POST", "/api/shutdown")
                self.proc.wait(20)
            except (OSError, urllib.error.URLError, subprocess.TimeoutExpired):
                pass
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def notebook_url(self, name: str) -> str:
        return f"{self.url}/lab/tree/{name}?token={self.token}&reset"


def write_notebook(path: Path, cells: list[str]) -> None:
    nb = {"nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                      "language": "python"}},
          "cells": [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "outputs": [],
                     "execution_count": None, "source": src} for i, src in enumerate(cells)]}
    path.write_text(json.dumps(nb))


def launch_chromium(playwright: Any, profile: Path) -> Any:
    """A persistent context on a fresh profile directory (headless Chromium from Debian)."""
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: apt-get install -y chromium")
    return playwright.chromium.launch_persistent_context(
        str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
        viewport={"width": 1600, "height": 1000})


class NotebookPage:
    """A JupyterLab page with one notebook open and its kernel idle."""

    # In-page: the notebook widget open on a path.
    FIND = ("(path) => window.jupyterapp.shell.widgets('main')"
            ".find(w => w.context && w.context.path === path && w.content)")

    def __init__(self, page: Any, artifacts: Path, path: str) -> None:
        self.page = page
        self.artifacts = artifacts
        self.path = path

    def open(self, url: str) -> None:
        self.page.goto(url)
        self.wait_kernel_idle(self.path)

    def wait_kernel_idle(self, path: str) -> None:
        self.page.wait_for_function(
            f"(path) => {{ const w = window.jupyterapp && ({self.FIND})(path);"
            " return w && w.sessionContext.session && w.sessionContext.session.kernel &&"
            " w.sessionContext.session.kernel.status === 'idle'; }", arg=path, timeout=60_000)

    def evaluate(self, body: str, path: str | None = None) -> Any:
        """Run ``body`` in the page with ``nb`` bound to the notebook widget (of ``path``)."""
        return self.page.evaluate(
            f"async (path) => {{ const nb = ({self.FIND})(path); {body} }}", path or self.path)

    def open_panel(self) -> Any:
        """Open the panel the way a user does: the command palette, by its label."""
        page = self.page
        page.keyboard.press("Control+Shift+C")
        palette = page.locator(".lm-CommandPalette-input")
        palette.wait_for(state="visible", timeout=20_000)
        palette.fill("Open nbdist Panel")
        item = page.locator(".lm-CommandPalette-item", has_text="Open nbdist Panel")
        item.first.wait_for(state="visible", timeout=20_000)
        page.keyboard.press("Enter")
        panel = page.locator("#nbdist-panel")
        panel.wait_for(state="visible", timeout=20_000)
        return panel

    def run_cell(self, code: str, wait: bool = True, timeout: float = 60) -> None:
        """Append a code cell to the current notebook and run it from the notebook's UI."""
        self.page.evaluate(
            """async ([code, path]) => {
                const app = window.jupyterapp;
                const nb = app.shell.widgets('main').find(w => w.context && w.context.path === path
                    && w.content);
                app.shell.activateById(nb.id);
                const model = nb.content.model;
                model.sharedModel.insertCell(model.cells.length, {cell_type: 'code', source: code});
                nb.content.activeCellIndex = model.cells.length - 1;
                window.__nbdistRun = app.commands.execute('notebook:run-cell');
            }""", [code, self.path])
        if wait:
            self.wait_run(timeout)

    def wait_run(self, timeout: float = 60) -> None:
        """Wait for the cell started last to finish; fail if it raised."""
        ok = self.page.evaluate(
            """async (timeout) => {
                const run = window.__nbdistRun;
                const timer = new Promise(r => setTimeout(() => r('timeout'), timeout));
                return await Promise.race([run, timer]);
            }""", timeout * 1000)
        if ok is not True:
            errors = self.page.locator(".jp-OutputArea-output[data-mime-type*='error']")
            text = errors.all_inner_texts() if errors.count() else []
            raise AssertionError(f"cell did not run cleanly ({ok!r}): {text}")

    def screenshot(self, name: str) -> None:
        self.artifacts.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(self.artifacts / f"{name}.png"))


def temp_root(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


# Installed before the page loads (``page.add_init_script``): records what the panel's graph
# canvas draws, in CSS pixels of the canvas, from the browser's own 2D-context calls. Each
# frame starts with a full clearRect, which starts a new record; `window.__nbdistGraph()` is the
# last frame's fillRect boxes (with their fill colour) and fillText labels (with their on-screen
# font size and width), and `frames` counts the frames drawn.
GRAPH_PROBE = """(() => {
    const P = CanvasRenderingContext2D.prototype;
    const frames = new WeakMap();
    let drawn = 0;
    const ours = ctx => ctx.canvas.classList && ctx.canvas.classList.contains('nbdist-graph-canvas');
    const screen = (ctx, x, y) => {
        const m = ctx.getTransform(), r = window.devicePixelRatio || 1;
        return [(m.a * x + m.c * y + m.e) / r, (m.b * x + m.d * y + m.f) / r, m.a / r];
    };
    const clear = P.clearRect, rect = P.fillRect, text = P.fillText;
    P.clearRect = function (x, y, w, h) {
        if (ours(this)) {
            frames.set(this.canvas, []);
            drawn++;
        }
        return clear.call(this, x, y, w, h);
    };
    P.fillRect = function (x, y, w, h) {
        if (ours(this)) {
            const [sx, sy, k] = screen(this, x, y);
            frames.get(this.canvas)?.push({kind: 'rect', color: String(this.fillStyle),
                                            x: sx, y: sy, w: w * k, h: h * k});
        }
        return rect.apply(this, arguments);
    };
    P.fillText = function (t, x, y) {
        if (ours(this)) {
            const [sx, sy, k] = screen(this, x, y);
            const px = parseFloat(/([0-9.]+)px/.exec(this.font)[1]);
            frames.get(this.canvas)?.push({kind: 'text', text: String(t), x: sx, y: sy,
                                            w: this.measureText(t).width * k, size: px * k});
        }
        return text.apply(this, arguments);
    };
    window.__nbdistGraph = () => {
        const canvas = document.querySelector('#nbdist-panel .nbdist-graph-canvas');
        return {records: (canvas && frames.get(canvas)) || [], frames: drawn,
                width: canvas ? canvas.clientWidth : 0, height: canvas ? canvas.clientHeight : 0};
    };
})();"""

# In-page: what in the panel is cut or overlaps, as readable strings (empty when all reads).
# Checked: every box that clips its content shows all of it across (scrollWidth <= clientWidth);
# every piece of text lies across inside the panel and inside each box that clips it; no two
# pieces of text, and no text and a bar, intersect. The graph's canvas area and the visually
# hidden list are left out (the graph has its own checks).
LAYOUT_PROBLEMS = """() => {
    const panel = document.querySelector('#nbdist-panel');
    const problems = [];
    const left = el => el.closest('.nbdist-visually-hidden, .nbdist-graph-view, .nbdist-tooltip');
    const shown = el => {
        const s = getComputedStyle(el);
        const r = el.getBoundingClientRect();
        return s.display !== 'none' && s.visibility !== 'hidden' && r.width > 0 && r.height > 0;
    };
    const name = el => el.tagName.toLowerCase() + (el.className ? '.' + String(el.className)
        .split(' ').join('.') : '') + ' "' + (el.textContent || '').trim().slice(0, 50) + '"';
    const clips = el => ['hidden', 'auto', 'scroll', 'clip'].includes(getComputedStyle(el).overflowX);
    const boxes = [];
    for (const el of panel.querySelectorAll('*')) {
        if (left(el) || !shown(el)) continue;
        if (clips(el) && el.scrollWidth > el.clientWidth + 1) {
            problems.push(`cut: ${name(el)} scrollWidth ${el.scrollWidth} > clientWidth ${el.clientWidth}`);
        }
        if (el.classList.contains('nbdist-bar')) boxes.push({el, r: el.getBoundingClientRect(), bar: true});
        for (const node of el.childNodes) {
            if (node.nodeType !== Node.TEXT_NODE || !node.textContent.trim()) continue;
            const range = document.createRange();
            range.selectNodeContents(node);
            for (const r of range.getClientRects()) {
                if (r.width < 1) continue;
                boxes.push({el, r, bar: false});
                for (let a = el; a && a !== panel.parentElement; a = a.parentElement) {
                    if (a !== el && !clips(a) && a !== panel) continue;
                    const c = a.getBoundingClientRect();
                    if (r.left < c.left - 1 || r.right > c.right + 1) {
                        problems.push(`text cut across by ${name(a)}: ${name(el)}`);
                        break;
                    }
                }
            }
        }
    }
    for (let i = 0; i < boxes.length; i++) {
        for (let j = i + 1; j < boxes.length; j++) {
            const a = boxes[i], b = boxes[j];
            if (a.bar && b.bar) continue;
            if (a.el === b.el && !a.bar) continue;
            const x = Math.min(a.r.right, b.r.right) - Math.max(a.r.left, b.r.left);
            const y = Math.min(a.r.bottom, b.r.bottom) - Math.max(a.r.top, b.r.top);
            if (x > 1 && y > 1) problems.push(`overlap: ${name(a.el)} and ${name(b.el)}`);
        }
    }
    return [...new Set(problems)];
}"""

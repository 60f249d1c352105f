"""The Jupyter layer of nbdist (L4): ``%load_ext nbdist`` and what it installs.

This package sees only nbdist's public names and ``nbdist.events``; the engine never imports it.
``load_ipython_extension(ip)`` wires one `_Extension` into the shell:

    magics            %nbdist start|status|stop, %%remote            (magics.py)
    submitter tag     the running cell's execute_request msg_id      (output.CellRouter)
    output handler    remote stdout/stderr into the submitting cell  (output.CellRouter)
    custom exc        remote errors shown as the user's own type,    (output.CellRouter)
                      an interrupted get/wait as one line
    interrupt         KeyboardInterrupt cancels the cell's tasks     (output.CellRouter)
    display           ObjectRef HTML, get/wait progress bars, Out[] rule  (display.py)
    runs              a live view per library run (Tune search, Train     (runview.py)
                      run) in the cell that started it; trials' output
                      grouped per trial
    tqdm_ray bars     one widget per bar, updated in place, in the   (tqdm_view.py)
                      cell that submitted the task
    comm bridge       target "nbdist" for the JupyterLab panel       (bridge.py, if present)

``unload_ipython_extension(ip)`` removes all of it; loading twice is a no-op.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from typing import Any

import nbdist
from nbdist import events
from nbdist.jupyter import debug_magics, plots
from nbdist.jupyter.display import WAIT_KINDS, HistoryGuard, ProgressBars, ref_html
from nbdist.jupyter.magics import NbdistMagics
from nbdist.jupyter.output import CellRouter
from nbdist.jupyter.runview import RunViews
from nbdist.jupyter.tqdm_view import TqdmBars
from nbdist.util import pdb as remote_pdb

__all__ = ["load_ipython_extension", "unload_ipython_extension"]


class _Extension:
    """Everything one shell's extension installed, so unload can take it out again."""

    def __init__(self, ip: Any) -> None:
        self.ip = ip
        self.router = CellRouter(ip)
        self.guard = HistoryGuard(ip)
        self.progress = ProgressBars(self._show_in_cell)
        self.runs = RunViews(self._show_run_view, lambda: self.router.current_tag)
        self.tqdm = TqdmBars(self._show_in_cell, lambda: self.router.current_tag)
        self._unsubscribe: list[Callable[[], None]] = []

    def install(self) -> None:
        ip = self.ip
        ip.register_magics(NbdistMagics)
        ip.events.register("pre_run_cell", self.router.pre_run_cell)
        ip.events.register("pre_run_cell", self.guard.pre_run_cell)
        ip.events.register("post_run_cell", self.router.post_run_cell)
        ip.events.register("post_run_cell", self.guard.post_run_cell)
        events.set_submitter(self.router.submitter)
        events.set_output_handler(self.router.handle_output)
        ip.set_custom_exc((nbdist.exceptions.TaskError, KeyboardInterrupt),
                          self.router.show_exception)
        html = ip.display_formatter.formatters["text/html"]
        html.for_type(nbdist.ObjectRef, ref_html)
        self._unsubscribe.append(events.subscribe(self.progress.on_events, WAIT_KINDS))
        self._unsubscribe.append(events.subscribe(self.runs.on_events, ["run_update"]))
        self.router.take_output = self.runs.take_output
        self.tqdm.install()
        remote_pdb.set_prompt(debug_magics.kernel_prompt(ip))

    def uninstall(self) -> None:
        ip = self.ip
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self.runs.close()
        self.tqdm.uninstall()
        self.router.take_output = None
        for name, cb in (("pre_run_cell", self.router.pre_run_cell),
                         ("pre_run_cell", self.guard.pre_run_cell),
                         ("post_run_cell", self.router.post_run_cell),
                         ("post_run_cell", self.guard.post_run_cell)):
            with contextlib.suppress(ValueError):
                ip.events.unregister(name, cb)
        events.set_submitter(None)
        events.set_output_handler(None)
        remote_pdb.set_prompt(None)
        ip.set_custom_exc((), None)
        ip.display_formatter.formatters["text/html"].pop(nbdist.ObjectRef, None)

    def _show_in_cell(self, tag: str | None, widget: Any) -> None:
        from IPython.display import display

        self.router.display_in_cell(tag, lambda: display(widget))

    def _show_run_view(self, tag: str | None, widget: Any) -> None:
        from IPython.display import display

        def show() -> None:
            plots.load_bokeh()  # once per frontend connection
            display(widget)

        self.router.display_in_cell(tag, show)


_installed: dict[int, _Extension] = {}


def load_ipython_extension(ip: Any) -> None:
    """``%load_ext nbdist``: install magics, output routing, error display and widgets."""
    if id(ip) in _installed:
        return
    ext = _Extension(ip)
    ext.install()
    _installed[id(ip)] = ext
    try:
        bridge = importlib.import_module(f"{__name__}.bridge")
    except ModuleNotFoundError:
        return  # the comm bridge is optional: magics, output and widgets work without it
    bridge.register(ip)


def unload_ipython_extension(ip: Any) -> None:
    """``%unload_ext nbdist``: take out everything the extension installed."""
    ext = _installed.pop(id(ip), None)
    if ext is not None:
        ext.uninstall()

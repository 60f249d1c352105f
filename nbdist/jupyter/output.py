"""Remote output, remote errors and interrupts, each tied to the cell that caused them.

How a remote ``print`` finds its cell::

    pre_run_cell      save ip.kernel.get_parent() (the execute_request) under its msg_id, the
                      cell's *tag*; nbdist.events.set_submitter returns the running cell's tag,
                      so every task, put and wait records it (nested tasks inherit it)
    a line arrives    on the driver's receiving thread: handle_output(lines) looks up the parent
                      saved for each line's tag, sets it as this thread's parent
                      (ip.set_thread_parent), writes "(name pid=N) line", flushes, resets it.
                      The frontend appends the text to that cell, even if it already finished.
    post_run_cell     a cell that ended in KeyboardInterrupt has its unfinished tasks
                      cancelled (force=True kills their workers, so their CPUs free at once)

Interrupts: a KeyboardInterrupt that arrives while the cell waits inside nbdist (a blocked
``get`` or ``wait``) would show the engine's own frames (its socket loop), which say nothing to
the user. The handler for it cancels the cell's tasks at once and shows one line saying what
was interrupted and what was cancelled, under the cell's own frames up to the call. An
interrupt anywhere else gets IPython's usual traceback.

Remote errors: ``get`` raises an exception that is both a TaskError and the user's type. The
handler installed with ``ip.set_custom_exc`` shows it as the user's type and message, the cell's
own frames up to the ``get`` call (driver frames inside nbdist are dropped) and the remote
traceback with "Cell In[N], line L" names and source lines taken from the kernel's linecache.

State: ``CellRouter`` belongs to the extension; its dict of saved parents is touched by the
kernel's main thread (writes) and the receiving thread (reads) under one lock, and keeps only the
last ``MAX_CELLS`` cells, so a long session does not grow without bound.
"""

from __future__ import annotations

import collections
import functools
import linecache
import re
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import nbdist
from nbdist import events
from nbdist.jupyter import debug_magics

MAX_CELLS = 1000
_NBDIST_DIR = str(Path(nbdist.__file__).resolve().parent)
_FRAME_RE = re.compile(r'^(\s*)File "([^"]+)", line (\d+), in (.+)$')


class CellRouter:
    """Saves each cell's parent message and routes remote output and errors back to it."""

    def __init__(self, ip: Any) -> None:
        self.ip = ip
        self._lock = threading.Lock()
        self._parents: collections.OrderedDict[str, dict[str, Any]] = collections.OrderedDict()
        self.current_tag: str | None = None
        self._cancelled_tag: str | None = None  # the interrupt handler already cancelled it
        # Takes the lines it shows elsewhere (trials' output, runview.py), returns the rest.
        self.take_output: Callable[[list[events.Output]], list[events.Output]] | None = None

    # -- cell lifecycle (IPython events, main thread) --------------------------------------

    def pre_run_cell(self, info: Any = None) -> None:
        kernel = getattr(self.ip, "kernel", None)
        parent = kernel.get_parent() if kernel is not None else None
        tag = (parent or {}).get("header", {}).get("msg_id")
        if not tag:
            # A plain IPython shell has no messages: a counter still groups work by cell.
            tag = f"cell-{self.ip.execution_count}"
        self.current_tag = tag
        if parent:
            with self._lock:
                self._parents[tag] = parent
                while len(self._parents) > MAX_CELLS:
                    self._parents.popitem(last=False)

    def post_run_cell(self, result: Any) -> None:
        interrupted = isinstance(getattr(result, "error_in_exec", None), KeyboardInterrupt)
        if interrupted and self._cancelled_tag != self.current_tag:
            self.cancel_cell(self.current_tag)
        self._cancelled_tag = None

    def cancel_cell(self, tag: str | None) -> int:
        """Cancel what the cell ``tag`` submitted and has not finished; returns the count."""
        if tag is None or not nbdist.is_initialized():
            return 0
        return nbdist.cancel_submitted(tag, force=True)

    def submitter(self) -> str | None:
        return self.current_tag

    # -- remote output (receiving thread) --------------------------------------------------

    def handle_output(self, lines: list[events.Output]) -> bool:
        if getattr(self.ip, "kernel", None) is None:
            return False  # no kernel to route through: let the driver print
        if self.take_output is not None:
            lines = self.take_output(lines)
        for tag, group in _group_by_tag(lines):
            self.display_in_cell(tag, functools.partial(_write, group))
        return True

    def display_in_cell(self, tag: str | None, show: Callable[[], None]) -> None:
        """Run ``show()`` (prints, displays) with its output going to the cell ``tag``."""
        with self._lock:
            parent = self._parents.get(tag) if tag is not None else None
        if parent is None or getattr(self.ip, "kernel", None) is None:
            show()  # unknown cell: output goes wherever the kernel sends it now
            return
        tokens = self.ip.set_thread_parent(parent)
        try:
            show()
        finally:
            self.ip.reset_thread_parent(tokens)

    # -- remote errors and interrupts (main thread) ----------------------------------------

    def show_exception(self, shell: Any, etype: type, value: BaseException,
                       tb: TracebackType | None, tb_offset: int | None = None) -> list[str]:
        """The ``set_custom_exc`` handler: remote errors and interrupts."""
        if isinstance(value, KeyboardInterrupt):
            return self.show_interrupt(shell, etype, value, tb, tb_offset)
        return self.show_task_error(shell, etype, value, tb, tb_offset)

    def show_interrupt(self, shell: Any, etype: type, value: BaseException,
                       tb: TracebackType | None, tb_offset: int | None = None) -> list[str]:
        call = _nbdist_call(tb)
        if call is None:
            shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
            return []
        tag = self.current_tag
        cancelled = self.cancel_cell(tag)
        self._cancelled_tag = tag
        what = (f"cancelled {cancelled} unfinished task{'s' if cancelled != 1 else ''} this "
                "cell submitted" if cancelled else
                "this cell had no unfinished tasks to cancel (work submitted by other cells "
                "keeps running; nbdist.cancel(ref) stops it)")
        message = f"{call}() was interrupted; {what}."
        stb = ["-" * 75, f"{'KeyboardInterrupt':<42}Traceback (most recent call last)",
               *_local_frames(shell, tb), f"KeyboardInterrupt: {message}"]
        shell._showtraceback(etype, KeyboardInterrupt(message), stb)
        return stb

    def show_task_error(self, shell: Any, etype: type, value: BaseException,
                        tb: TracebackType | None, tb_offset: int | None = None) -> list[str]:
        cause = getattr(value, "cause", None)
        shown_type = type(cause) if isinstance(cause, BaseException) else etype
        stb = format_task_error(shell, value, tb, shown_type)
        # IPython ignores what a custom handler returns on this path; send it ourselves,
        # named as the user's exception type so frontends show "ValueError", not TaskError.
        shell._showtraceback(shown_type, cause if cause is not None else value, stb)
        debug_magics.remember(value)  # %debug opens pdb in the task's frames
        return stb


def _group_by_tag(lines: list[events.Output]) -> list[tuple[str | None, list[events.Output]]]:
    groups: list[tuple[str | None, list[events.Output]]] = []
    for line in lines:
        if groups and groups[-1][0] == line.submitter:
            groups[-1][1].append(line)
        else:
            groups.append((line.submitter, [line]))
    return groups


def _write(lines: list[events.Output]) -> None:
    for line in lines:
        out = sys.stderr if line.stream == "stderr" else sys.stdout
        out.write(f"({line.name} pid={line.worker_pid}) {line.line}\n")
    sys.stdout.flush()
    sys.stderr.flush()


def format_task_error(shell: Any, value: BaseException, tb: TracebackType | None,
                      shown_type: type) -> list[str]:
    """A structured traceback (list of text blocks) for a remote failure, like IPython's."""
    rule = "-" * 75
    head = f"{shown_type.__name__:<42}Traceback (most recent call last)"
    blocks = [rule, head]
    blocks.extend(_local_frames(shell, tb))
    task = getattr(value, "function_name", "?")
    pid = getattr(value, "pid", 0)
    remote = _rewrite_remote(shell, getattr(value, "remote_traceback", ""))
    blocks.append(f"\nRemote traceback (task '{task}', pid={pid}):\n{remote}\n")
    cause = getattr(value, "cause", None)
    message = str(cause) if cause is not None else str(value)
    blocks.append(f"{shown_type.__name__}: {message}" if message else shown_type.__name__)
    return blocks


def _nbdist_call(tb: TracebackType | None) -> str | None:
    """The nbdist call the traceback entered nbdist through (``nbdist.get``,
    ``ActorMethod.remote``); None if it never entered nbdist."""
    for frame, _ in traceback.walk_tb(tb):
        code = frame.f_code
        if _in_nbdist(code.co_filename):
            if frame.f_globals.get("__name__") == "nbdist.driver.api":
                return f"nbdist.{code.co_name}"
            return getattr(code, "co_qualname", code.co_name)  # 3.11+
    return None


def _in_nbdist(filename: str) -> bool:
    return str(Path(filename).resolve()).startswith(_NBDIST_DIR)


def _local_frames(shell: Any, tb: TracebackType | None) -> list[str]:
    """The driver-side frames of user code, stopping where the call enters nbdist."""
    out = []
    for frame, lineno in traceback.walk_tb(tb):
        filename = frame.f_code.co_filename
        if _in_nbdist(filename):
            break
        if "IPython" in filename and "interactiveshell" in filename:
            continue  # run_code's own frame
        out.append(_frame_text(shell, filename, lineno, frame.f_code.co_name))
    return out


def _frame_text(shell: Any, filename: str, lineno: int, func: str) -> str:
    label = _cell_label(shell, filename)
    where = f"{label}, line {lineno}" + ("" if func == "<module>" else f", in {func}")
    src = []
    for n in range(max(1, lineno - 2), lineno + 1):
        text = linecache.getline(filename, n).rstrip()
        if text or n == lineno:
            marker = "---->" if n == lineno else "     "
            src.append(f"{marker} {n} {text}")
    return "\n".join([where, *src])


def _cell_label(shell: Any, filename: str) -> str:
    compiler = getattr(shell, "compile", None)
    fmt = getattr(compiler, "format_code_name", None)
    named = fmt(filename) if fmt is not None else None
    return f"{named[0]} {named[1]}" if named else f"File {filename}"


def _rewrite_remote(shell: Any, text: str) -> str:
    """Rename cell files to "Cell In[N]" and add the source lines the worker did not have."""
    out = []
    for line in text.strip("\n").splitlines():
        m = _FRAME_RE.match(line)
        if m is None:
            if line.strip() != "Traceback (most recent call last):":
                out.append(line)
            continue
        _, filename, lineno, func = m.groups()
        out.append(_frame_text(shell, filename, int(lineno), func))
    # The worker's last line repeats "Type: message"; the caller prints it once at the end.
    if out and not out[-1].startswith(("Cell ", "File ", "---->", "     ")):
        out.pop()
    return "\n".join(out)

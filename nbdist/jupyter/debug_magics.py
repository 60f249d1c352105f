"""Debugging remote code from the notebook: the prompt and ``%nbdist debug|stack|why`` (L4).

The extension installs `kernel_prompt` with `nbdist.util.pdb.set_prompt`: a task that
pauses at ``breakpoint()`` while a cell waits on it (``get``/``wait``) gets its pdb prompt in
that cell, through the kernel's stdin exactly as ``input()`` does, when the cell's request
allows stdin; otherwise the task stays listed for ``%nbdist debug|stack|why``.

    %nbdist debug [TASK]        be the prompt of a paused task (the oldest by default)
    %nbdist debug --list        the paused tasks of the cluster
    %nbdist debug --last        post-mortem pdb on the last remote error's frames (= %debug)
    %nbdist stack [TASK]        the current Python stacks of running tasks
    %nbdist why                 why the blocked (or last) get/wait waits

After a cell that raised a task's error, `remember` points ``sys.last_traceback`` (what
IPython's ``%debug`` reads) at the task's own frames, rebuilt from the snapshot its worker
sent with the error: ``%debug`` lists their source and prints their locals.
"""

from __future__ import annotations

import argparse
import builtins
import sys
from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError

from nbdist.exceptions import NbdistError
from nbdist.util import pdb as remote_pdb

Prompt = tuple[Callable[[str], str], Callable[[str], None]]


def kernel_prompt(ip: Any) -> Callable[[], Prompt | None]:
    """The cell's stdin while the running cell's request allows it, else None."""
    def prompt() -> Prompt | None:
        kernel = getattr(ip, "kernel", None)
        if kernel is None or not getattr(kernel, "_allow_stdin", False):
            return None
        return builtins.input, _show

    return prompt


def _show(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def add_parsers(sub: Any) -> None:
    """The subcommands' parsers, added to ``%nbdist``'s."""
    debug = sub.add_parser("debug", help="the pdb prompt of a task paused at breakpoint() "
                           "(the oldest, or TASK: an id prefix or a name); --list lists them")
    debug.add_argument("task", nargs="?", metavar="TASK")
    debug.add_argument("--list", action="store_true", help="list the paused tasks")
    debug.add_argument("--last", action="store_true",
                       help="pdb on the frames of the last remote error (as %%debug)")
    stack = sub.add_parser("stack", help="the current Python stacks of running tasks (all, "
                           "or TASK: an id prefix or a name)")
    stack.add_argument("task", nargs="?", metavar="TASK")
    sub.add_parser("why", help="why the blocked (or last) get/wait waits: what each task it "
                   "waits for is doing, or what holds it")


def run(args: argparse.Namespace) -> None:
    try:
        _run(args)
    except NbdistError as exc:  # e.g. DebuggerUnavailable on backend="ray"
        raise UsageError(f"%nbdist {args.command}: {exc}") from None


def _run(args: argparse.Namespace) -> None:
    if args.command == "debug":
        _debug(args)
    elif args.command == "stack":
        print(remote_pdb.stacks(args.task))
    elif args.command == "why":
        from nbdist.util.why import why

        print(why())


def remember(error: BaseException) -> None:
    """A cell raised a task's ``error``: what ``%debug`` reads (``sys.last_*``) becomes its
    remote frames, so IPython's own post-mortem opens pdb where the task raised."""
    tb = remote_pdb.remote_traceback(error)
    if tb is None:
        return
    sys.last_type, sys.last_value, sys.last_traceback = type(error), error, tb
    try:
        error.__traceback__ = tb
    except (AttributeError, TypeError):
        pass


def _debug(args: argparse.Namespace) -> None:
    if args.last:
        from IPython import get_ipython

        if remote_pdb.remote_traceback(getattr(sys, "last_value", None)) is None:
            raise UsageError("%nbdist debug --last: the last error was not a remote task's "
                             "(or came without its frames).")
        get_ipython().debugger(force=True)
        return
    if args.list:
        sessions = remote_pdb.paused()
        print("\n".join(remote_pdb.describe(i) for i in sessions) if sessions
              else "No task is paused in the debugger.")
        return
    how = remote_pdb.attach(args.task, builtins.input, _show)
    print({"continue": "nbdist: the task runs on.",
           "quit": "nbdist: the task was ended (its get raises DebuggerQuit).",
           "gone": ""}.get(how, ""))

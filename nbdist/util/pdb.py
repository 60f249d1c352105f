"""``nbdist.util.pdb``: debug remote code from the program that runs it (public API).

    set_trace()               pause the running task here for pdb (as ``breakpoint()`` and
                              ``pdb.set_trace()`` do inside any nbdist task or actor method)
    paused() -> list[dict]    the tasks paused in the debugger now, in the whole cluster
    describe(info) -> str     one line for one of them
    post_mortem(error=None)   pdb on the remote frames of a task's error (by default the
                              last one raised), rebuilt from the snapshot its worker sent
    remote_traceback(error)   those frames as traceback objects (what %debug reads)
    stacks(task=None, timeout=10) -> str
                              the current Python stacks of running tasks (their workers are
                              asked; on this machine's node)
    attach(task=None, ask=input, show=print) -> str
                              be the pdb prompt of a paused task (by id prefix or name; the
                              oldest by default); returns how it ended: "continue", "quit"
                              or "gone" (KeyboardInterrupt detaches)
    set_prompt(fn)            where a blocked get/wait shows the prompt of a task that pauses
                              (the notebook extension: the cell's stdin; default: the
                              terminal, when there is one)

The engine side is `nbdist.daemons.debugger` (the worker's pdb, its socket and token) and
`nbdist.driver.debug` (the driver's prompt relay). On ``backend="ray"`` a task's pause is
Ray's own: ``set_trace`` calls Ray's ``ray.util.rpdb.set_trace`` (with ``RAY_DEBUG=legacy``,
attach with ``ray debug`` in a terminal; by default Ray waits for its VS Code debugger); `paused` and `attach` raise `DebuggerUnavailable`, saying so.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import TracebackType
from typing import Any

from nbdist.backends.base import current
from nbdist.daemons import debugger as _worker_side
from nbdist.daemons import tb_snapshot as _tb_snapshot
from nbdist.driver import debug as _driver_side
from nbdist.exceptions import NbdistError

__all__ = ["DebuggerUnavailable", "attach", "describe", "paused", "post_mortem",
           "remote_traceback", "set_prompt", "set_trace", "stacks"]

RAY_HINT = ("On backend='ray', remote pdb is Ray's own: breakpoint() in a task (with "
            "RAY_DEBUG=legacy in the workers' environment) pauses it, and `ray debug` in a "
            "terminal attaches; nbdist's %nbdist debug and nbdist debug work on nbdist's engine.")


class DebuggerUnavailable(NbdistError):
    """nbdist's remote debugger needs nbdist's own engine."""


def _on_ray() -> bool:
    return type(current.backend).__name__ == "RayBackend"


def set_trace() -> None:
    """Pause the running task at the caller's line for pdb (in a driver: plain pdb)."""
    frame = sys._getframe(1)
    if _worker_side.active():
        _worker_side.set_trace(frame)
        return
    if "ray" in sys.modules and _on_ray():
        from ray.util import rpdb  # Ray's remote pdb (`ray debug`, or its VS Code debugger)

        rpdb.set_trace()
        return
    import pdb

    pdb.Pdb().set_trace(frame)


def _control() -> Callable[[str, Any], Any]:
    if _on_ray():
        raise DebuggerUnavailable(RAY_HINT)
    from nbdist.driver import runtime

    return runtime.current().control


def paused() -> list[dict[str, Any]]:
    """Every task paused in the debugger: task (hex id), name, pid, node, where, since."""
    return [{k: v for k, v in info.items() if k != "token"}
            for info in _driver_side.listed(_control())]


def describe(info: dict[str, Any]) -> str:
    """One line for a paused task of `paused`."""
    return _driver_side.describe(info)


def attach(task: str | None = None, ask: Callable[[str], str] = input,
           show: Callable[[str], None] | None = None) -> str:
    """Be the pdb prompt of the paused ``task`` (see the module docstring)."""
    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    return _driver_side.attach(_control(), task, ask, show or write)


def set_prompt(fn: Callable[[], tuple[Callable[[str], str], Callable[[str], None]] | None]
               | None) -> None:
    """``fn()`` gives (ask, show) for a pdb prompt where the program waits, or None."""
    _driver_side.set_prompt(fn)



def remote_traceback(error: BaseException | None) -> TracebackType | None:
    """Traceback objects standing for the remote frames where a task's ``error`` was raised
    (rebuilt from the snapshot that came with it), or None if it carries none."""
    frames = _tb_snapshot.find(error)
    return _tb_snapshot.rebuild(frames) if frames else None


def post_mortem(error: BaseException | None = None) -> None:
    """pdb on the remote frames of a task's ``error`` (default: the last one raised in this
    interpreter, ``sys.last_value``), with their source and locals."""
    error = error if error is not None else getattr(sys, "last_value", None)
    tb = remote_traceback(error)
    if tb is None:
        raise NbdistError("No remote traceback to debug: post_mortem() takes the error of a "
                          "task (as raised by get), or debugs the last one raised.")
    import pdb

    debugger = pdb.Pdb()
    debugger.reset()
    debugger.interaction(None, tb)


def stacks(task: str | None = None, timeout: float = 10.0) -> str:
    """The current Python stacks of the running tasks (or of ``task``: an id prefix or a
    name), asked of their workers (each has ``timeout`` seconds to answer); tasks on other
    machines are listed without theirs."""
    from nbdist import events

    client = _client()
    running = [(w.task_id, w.task_name or "?", w.node_id, w.pid) for w in events.workers()
               if w.task_id and w.state == "up"
               and (not task or w.task_id.startswith(task) or w.task_name == task)]
    return _driver_side.format_stacks(_driver_side.stacks(client.node_id, running, timeout))


def _client() -> Any:
    if _on_ray():
        raise DebuggerUnavailable(
            "On backend='ray', Ray's dashboard shows a task's stack (py-spy); %nbdist stack "
            "works on nbdist's engine.")
    from nbdist.driver import runtime

    return runtime.current()


def main(argv: list[str]) -> int:
    """``nbdist debug [TASK] [--list] [--address HOST:PORT] [--token T]``: a terminal's pdb
    prompt for a task paused in a cluster started with ``nbdist start`` (lines from stdin)."""
    import argparse

    from nbdist.cluster import standalone

    parser = argparse.ArgumentParser(
        prog="nbdist debug", description="Attach to a task paused at breakpoint() (the oldest, "
        "or TASK: a task id prefix or a function name), or list them.")
    parser.add_argument("task", nargs="?", metavar="TASK")
    parser.add_argument("--list", action="store_true", help="list the paused tasks")
    parser.add_argument("--address", metavar="HOST:PORT",
                        help="the cluster's head (default: the cluster started on this machine)")
    parser.add_argument("--token", help="the cluster token (or NBDIST_TOKEN)")
    args = parser.parse_args(argv)
    try:
        head = (standalone.head_address(args.address) if args.address
                else standalone.auto_address())
        standalone.use_tls(head)
        secret = standalone.find_token(head, args.token)

        def control(op: str, value: Any) -> Any:
            return standalone.head_request(head, secret, op, value)

        if args.list:
            sessions = _driver_side.listed(control)
            print("\n".join(describe(i) for i in sessions) if sessions
                  else "No task is paused in the debugger.")
            return 0
        how = _driver_side.attach(control, args.task, input, _write)
    except NbdistError as exc:
        print(f"nbdist debug: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    print({"continue": "nbdist: the task runs on.",
           "quit": "nbdist: the task was ended."}.get(how, ""))
    return 0 if how != "gone" else 1


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()

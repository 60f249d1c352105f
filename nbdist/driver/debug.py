"""The driver's side of remote pdb: paused tasks and the prompt that reaches them (layer L2).

A worker whose task stops in the debugger (`nbdist.daemons.debugger`) sends its driver one
output line on `DEBUG_STREAM`. `notice` (called by the driver's records, on the thread that
reads the connection) takes it aside: the session joins ``_pending`` (arrival order), a
`TaskPaused` record is published, and the client's ``attention`` is set. A thread blocked in
``get``/``wait`` calls ``attention`` between slices of its wait (`runtime.CoreClient`): on
the main thread, with a prompt available, `attend` relays each pending session in turn, so
the pdb prompt appears where the program waits: the cell's stdin in a kernel (the notebook
layer installs its prompt with `set_prompt`), the terminal for a script. Without a prompt
(no terminal, or a kernel cell that has no stdin) the session stays listed and a line under
the task's output says how to attach (``%nbdist debug`` or ``nbdist debug``).

`relay` is the client of one session: it connects (the session's token proves it), prints
what pdb prints, answers each ``ask`` with a line from ``ask(prompt)``, and returns how the
session ended: "continue", "quit" or "gone" (the worker went away); an interrupt of the
prompt (KeyboardInterrupt) detaches and goes up to the caller: the task stays paused for a
later attach (unless the interrupt cancels it, as a kernel's interrupt does its cell's work). `listed` reads every paused
session of the cluster from the head's store (`attach` by task id prefix or the first).
"""

from __future__ import annotations

import collections
import json
import linecache
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nbdist import events as ev
from nbdist.daemons.debugger import DEBUG_STREAM, KV_PREFIX
from nbdist.exceptions import NbdistError
from nbdist.wire import transport

if TYPE_CHECKING:
    from nbdist.driver.runtime import CoreClient

__all__ = ["DEBUG_STREAM", "attach", "attend", "listed", "notice", "relay", "set_prompt"]

Ask = Callable[[str], str]
Show = Callable[[str], None]
HINT_AFTER_S = 1.0  # a session no prompt took by then gets a line saying how to attach

_lock = threading.Lock()
_pending: collections.OrderedDict[str, dict[str, Any]] = collections.OrderedDict()
_taken: set[str] = set()  # sessions a relay of this process has attached to
_prompt: Callable[[], tuple[Ask, Show] | None] | None = None


def set_prompt(fn: Callable[[], tuple[Ask, Show] | None] | None) -> None:
    """Who answers pdb in a blocked get (the notebook layer: the cell's stdin); ``fn()``
    returns (ask, show), or None when no prompt can be shown now."""
    global _prompt
    _prompt = fn


def _terminal() -> tuple[Ask, Show] | None:
    try:
        if not sys.stdin.isatty():
            return None
    except (AttributeError, ValueError):
        return None

    def show(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    return input, show


def _key(info: dict[str, Any]) -> str:
    return f"{info['task']}:{info['pid']}"


# ---------------------------------------------------------------- notices from workers
def notice(client: CoreClient, task_id: int, name: str, pid: int, text: str,
           show_output: Callable[[list[ev.Output], bool], None]) -> None:
    """A line on `DEBUG_STREAM`: a session opened, or ended (``show_output``: how the
    driver shows a task's output lines, for the line saying how to attach)."""
    for line in text.splitlines():
        try:
            info = json.loads(line)
        except ValueError:
            continue
        if not isinstance(info, dict) or "task" not in info:
            continue
        if "end" in info:
            _ended(info)
            continue
        key = _key(info)
        with _lock:
            _pending[key] = info
            client.attention = attend
        ev.publish(ev.TaskPaused(time.time(), info["task"], str(info.get("name", name)),
                                 int(info["pid"]), str(info.get("node", "")),
                                 str(info.get("where", ""))))
        timer = threading.Timer(HINT_AFTER_S, _hint, (client, task_id, info, show_output))
        timer.daemon = True
        timer.start()


def _ended(info: dict[str, Any]) -> None:
    key = _key(info)
    with _lock:
        was = _pending.pop(key, None)
        _taken.discard(key)
    if was is not None or info.get("end"):
        ev.publish(ev.TaskPaused(time.time(), info["task"], str((was or {}).get("name", "")),
                                 int(info["pid"]), str((was or {}).get("node", "")),
                                 str((was or {}).get("where", "")), False, str(info["end"])))


def _hint(client: CoreClient, task_id: int, info: dict[str, Any],
          show_output: Callable[[list[ev.Output], bool], None]) -> None:
    key = _key(info)
    with _lock:
        if key not in _pending or key in _taken:
            return
    text = (f"nbdist: paused at {info.get('reason', 'a breakpoint')} in {info.get('where')}; "
            f"no prompt here: attach with `%nbdist debug {info['task'][:8]}` in a notebook, "
            f"or `nbdist debug {info['task'][:8]}` in a terminal")
    show_output([ev.Output(time.time(), info["task"], str(info.get("name", "")),
                                   int(info["pid"]), "stderr", text,
                                   client.task_tags.get(task_id))], True)


def pending() -> list[dict[str, Any]]:
    """Sessions of this driver's tasks that no relay here has taken, oldest first."""
    with _lock:
        return [dict(i) for k, i in _pending.items() if k not in _taken]


def attend(client: CoreClient) -> None:
    """Called by a thread blocked in get/wait: relay the pending sessions (main thread, with a
    prompt); returns when none is left that it could take."""
    if threading.current_thread() is not threading.main_thread():
        return
    prompt = (_prompt or _terminal)()
    while True:
        with _lock:
            waiting = [i for k, i in _pending.items() if k not in _taken]
            if not _pending:
                client.attention = None
        if not waiting or prompt is None:
            return
        try:
            relay(waiting[0], *prompt)
        except KeyboardInterrupt:
            # The waiting program was interrupted at the prompt: as for any work it waits
            # on, the paused task is cancelled (the cancel reaches it in the debugger).
            client.cancel_task(int(waiting[0]["task"], 16), False)
            raise


# ---------------------------------------------------------------- one session
def relay(info: dict[str, Any], ask: Ask, show: Show, timeout: float = 10.0) -> str:
    """Be the client of one paused session until it ends; see the module docstring."""
    key = _key(info)
    with _lock:
        _taken.add(key)
    try:
        return _relay(info, ask, show, timeout)
    finally:
        with _lock:
            _taken.discard(key)


def _relay(info: dict[str, Any], ask: Ask, show: Show, timeout: float) -> str:
    address = f"tcp:{info['host']}:{info['port']}"
    try:
        sock = transport.connect(address, bytes.fromhex(info["token"]), timeout)
    except (OSError, NbdistError) as exc:
        _forget(info)
        show(f"nbdist: task {info.get('name')!r} (pid {info.get('pid')}) is no longer "
             f"paused ({exc}).\n")
        return "gone"
    reader = sock.makefile("rb")
    try:
        while True:
            raw = reader.readline(1 << 22)
            if not raw:
                _forget(info)
                show(f"nbdist: the debugger of task {info.get('name')!r} went away (the task "
                     "ended, was cancelled, or its worker died).\n")
                return "gone"
            msg = json.loads(raw)
            if "out" in msg:
                show(msg["out"])
            elif "ask" in msg:
                try:
                    line = ask(msg["ask"])
                except EOFError:
                    line = "q"
                except KeyboardInterrupt:
                    show("\nnbdist: detached from the paused task.\n")
                    raise
                sock.sendall(json.dumps({"line": line}).encode() + b"\n")
            elif "source" in msg:
                lines = linecache.getlines(str(msg["source"]))
                sock.sendall(json.dumps({"line": json.dumps(lines)}).encode() + b"\n")
            elif "end" in msg:
                _forget(info)
                return str(msg["end"])
    finally:
        reader.close()
        sock.close()


def _forget(info: dict[str, Any]) -> None:
    with _lock:
        _pending.pop(_key(info), None)


# ---------------------------------------------------------------- listing, attaching
def listed(control: Callable[[str, Any], Any]) -> list[dict[str, Any]]:
    """Every paused session the cluster's head knows of, oldest first (``control`` asks the
    head: a client's ``control``, or the CLI's request)."""
    entries = control("kv_list", KV_PREFIX) or {}
    alive = []
    for key, info in entries.items():
        if _listening(info):
            alive.append(dict(info))
        else:  # its worker died paused (killed, or its node went away): forget it
            try:
                control("kv_del", key)
            except NbdistError:
                pass
    return sorted(alive, key=lambda i: i.get("since", 0.0))


def _listening(info: dict[str, Any]) -> bool:
    try:
        with socket.create_connection((info["host"], int(info["port"])), timeout=2.0):
            return True
    except OSError:
        return False


def choose(sessions: list[dict[str, Any]], task: str | None) -> dict[str, Any]:
    """The session of the task whose id starts with ``task`` (or whose name is ``task``), or
    the oldest; NbdistError if there is none."""
    if not sessions:
        raise NbdistError("No task is paused in the debugger. A task pauses at breakpoint() "
                          "(or pdb.set_trace()) in its code.")
    if not task:
        return sessions[0]
    for info in sessions:
        if info["task"].startswith(task) or info.get("name") == task:
            return info
    names = ", ".join(f"{i['task'][:8]} ({i.get('name')})" for i in sessions)
    raise NbdistError(f"No paused task matches {task!r}; paused: {names}.")


def describe(info: dict[str, Any]) -> str:
    age = time.time() - float(info.get("since", time.time()))
    return (f"{info['task'][:8]}  {info.get('name')!s:<24} pid {info.get('pid')}  node "
            f"{str(info.get('node', ''))[:12]}  paused {age:.0f} s at "
            f"{info.get('reason', 'a breakpoint')} in {info.get('where')}")


def attach(control: Callable[[str, Any], Any], task: str | None, ask: Ask, show: Show) -> str:
    """Relay the paused session of ``task`` (see `choose`); returns how it ended."""
    info = choose(listed(control), task)
    return relay(info, ask, show)


# ---------------------------------------------------------------- stacks of running tasks
def stacks(node_id: str, running: list[tuple[str, str, str, int]], timeout: float = 10.0
           ) -> list[tuple[tuple[str, str, str, int], dict[str, Any] | str]]:
    """For each running task ``(task id, name, node, worker pid)``: its worker's stacks
    (`nbdist.daemons.debugger.stacks`), or a sentence saying why there are none."""
    from nbdist.daemons.debugger import STACKS_SIGNAL, stacks_file

    asked = []
    for item in running:
        if item[2] != node_id:
            asked.append((item, f"runs on node {item[2][:12]}: stacks come from workers on "
                                "this machine only (run %nbdist stack on a driver there)"))
            continue
        path = stacks_file(item[3])
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        try:
            os.kill(item[3], STACKS_SIGNAL)
        except OSError as exc:
            asked.append((item, f"its worker cannot be reached ({exc})"))
            continue
        asked.append((item, path))
    deadline = time.monotonic() + timeout
    out: list[tuple[tuple[str, str, str, int], dict[str, Any] | str]] = []
    for item, path in asked:
        if not path.startswith(os.sep):
            out.append((item, path))
            continue
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.02)
        try:
            with open(path) as f:
                out.append((item, json.load(f)))
            os.unlink(path)
        except (OSError, ValueError):
            out.append((item, f"its worker did not answer within {timeout:g} s (busy in "
                              "code that holds the interpreter)"))
    for _, path in asked:
        if path.startswith(os.sep):
            try:
                os.rmdir(os.path.dirname(path))  # once empty: nothing left in /tmp
            except OSError:
                pass
            break
    return out


def format_stacks(found: list[tuple[tuple[str, str, str, int], dict[str, Any] | str]]) -> str:
    if not found:
        return "No task is running."
    lines = []
    for (task, name, node, pid), what in found:
        lines.append(f"task {name!r} ({task[:18]}, pid {pid}, node {node[:12]}):")
        if isinstance(what, str):
            lines.append(f"  (no stack: {what})")
            continue
        threads = what.get("threads", {})
        if not threads:
            lines.append("  (no thread runs user code now)")
        for thread, frames in threads.items():
            lines.append(f"  thread {thread}:")
            for filename, lineno, func, source in frames:
                lines.append(f'    File "{filename}", line {lineno}, in {func}')
                # A notebook cell's line is known here, not on the worker.
                source = source or linecache.getline(filename, lineno).strip()
                if source:
                    lines.append(f"      {source}")
    return "\n".join(lines)

"""Remote pdb in a worker: a paused task, and how a driver reaches it (layer L2).

A task that calls ``breakpoint()`` (``sys.breakpointhook``), ``pdb.set_trace()`` or
``nbdist.util.pdb.set_trace()`` pauses on its own thread, keeping its worker and resources:

1. A `Session` opens a TCP listener on the node's host (port 0; loopback on a one-machine
   cluster) guarded by a fresh per-session token.
2. It tells the driver that submitted the task: one line on the task's output stream
   `DEBUG_STREAM` holding the session as JSON (``task, name, pid, node, host, port, token,
   where``). The node routes it like any output line (to a driver on another node too); the
   driver's records take it aside (`nbdist.driver.debug`), never print it.
3. It records the same under ``nbdist:debug:<task hex>`` in the head's key-value store, so
   ``%nbdist debug`` or ``nbdist debug`` (another process) can find it when no cell waits.

A client connects (TLS where the cluster uses it), proves the token with the transport's HMAC
challenge, then both sides exchange newline-delimited JSON objects::

    worker -> client   {"out": text}       pdb's output
                       {"ask": prompt}     pdb waits for a line
                       {"source": file}    the lines of a file it cannot read (a notebook
                                           cell's): the client answers {"line": json list}
                       {"end": how}        "continue" or "quit": the session is over
    client -> worker   {"line": text}

One client at a time. A client that goes away leaves the task paused: pdb's next read waits for
the next client, which first gets the header and the last output again. ``c`` with no
breakpoints left, or ``q``, ends the session: listener closed, store entry removed. ``q``
raises `bdb.BdbQuit` in the task, which `explain` turns into `DebuggerQuit` at ``get``.

Live post-mortem (``init(debug_post_mortem=True)``, or ``NBDIST_DEBUG_POST_MORTEM=1`` or Ray's
``RAY_DEBUG_POST_MORTEM=1`` in the worker's environment): `post_mortem` opens the same kind of
session on the traceback of a task's exception before the task fails with it.
"""

from __future__ import annotations

import bdb
import code
import json
import linecache
import os
import pdb
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from types import FrameType, TracebackType
from typing import IO, Any, cast

from nbdist.daemons import tb_snapshot
from nbdist.exceptions import DebuggerQuit, TaskError
from nbdist.ids import hex_id
from nbdist.wire import transport

DEBUG_STREAM = "nbdist-debug"  # the output stream a worker's pause notice travels on
KV_PREFIX = "nbdist:debug:"
# Frames of these modules are nbdist's own: stepping never stops in them.
_SKIP = ["nbdist.daemons.*", "nbdist.driver.*", "nbdist.wire.*", "cloudpickle.*", "asyncio.*",
         "concurrent.*", "threading"]


class _Detached(Exception):
    """The client went away (or none came yet): wait for the next one."""


class Channel:
    """pdb's stdin and stdout: a text stream over the session's client connection."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.conn: socket.socket | None = None
        self.reader: Any = None
        self.pending = ""  # written and not yet sent (no client, or no newline yet)
        self.history: list[str] = []  # what the last stop printed: shown again to a new client
        self.encoding = "utf-8"

    # pdb's stdout
    def write(self, text: str) -> int:
        self.pending += text
        return len(text)

    def flush(self) -> None:
        head, sep, tail = self.pending.rpartition("\n")
        if sep and self.conn is not None:
            self.pending = tail
            self._send({"out": head + "\n"})
            self.history.append(head + "\n")

    def isatty(self) -> bool:
        return False

    # pdb's stdin
    def readline(self) -> str:
        prompt = self.ask_text()
        while True:
            try:
                self._connect()
                self.flush()
                self._send({"ask": prompt})
                line = self._receive()
            except _Detached:
                self._drop()
                continue
            self.history = []
            return line + "\n"

    def ask(self, prompt: str) -> str:
        """A line for ``interact``'s console (its prompt is not pdb's)."""
        self.write(prompt)
        line = self.readline()
        return line.rstrip("\n")

    def ask_text(self) -> str:
        head, sep, tail = self.pending.rpartition("\n")
        self.pending = head + sep
        return tail

    def sources(self, filenames: list[str]) -> None:
        """Ask the client for the lines of files this process cannot read (a notebook cell's
        code lives in the kernel's linecache only), so pdb lists them."""
        for name in filenames:
            if linecache.getlines(name):
                continue
            while True:
                try:
                    self._connect()
                    self._send({"source": name})
                    lines = json.loads(self._receive())
                except (_Detached, ValueError):
                    self._drop()
                    continue
                break
            if isinstance(lines, list) and lines:
                text = [str(x) for x in lines]
                linecache.cache[name] = (sum(map(len, text)), None, text, name)

    def _connect(self) -> None:
        while self.conn is None:
            conn = self.session.accept()
            if conn is not None:
                self.conn = conn
                self.reader = conn.makefile("rb")
                self._send({"out": self.session.header()})
                if self.history:
                    self._send({"out": "".join(self.history)})

    def _send(self, msg: dict[str, str]) -> None:
        if self.conn is None:
            raise _Detached
        try:
            self.conn.sendall(json.dumps(msg).encode() + b"\n")
        except OSError:
            raise _Detached from None

    def _receive(self) -> str:
        try:
            raw = self.reader.readline(1 << 20)
            msg = json.loads(raw) if raw else None
        except (OSError, ValueError):
            msg = None
        if not isinstance(msg, dict) or not isinstance(msg.get("line"), str):
            raise _Detached
        return str(msg["line"])

    def _drop(self) -> None:
        if self.conn is not None:
            for closing in (self.reader, self.conn):
                try:
                    closing.close()
                except OSError:
                    pass
        self.conn = self.reader = None

    def end(self, how: str) -> None:
        self.flush()
        if self.pending and self.conn is not None:
            try:
                self._send({"out": self.pending})
            except _Detached:
                pass
        try:
            self._send({"end": how})
        except _Detached:
            pass
        self._drop()


class _Console(code.InteractiveConsole):
    """``interact``: a console whose prompts and output go over the channel."""

    def __init__(self, channel: Channel, local: dict[str, Any]) -> None:
        super().__init__(local, filename="<interact>")
        self.channel = channel

    def raw_input(self, prompt: str = "") -> str:
        line = self.channel.ask(prompt)
        if line == "\x04" or line == "exit()":
            raise EOFError
        return line

    def write(self, data: str) -> None:
        self.channel.write(data)
        self.channel.flush()


class RemotePdb(pdb.Pdb):
    """pdb over a `Channel`; ends its session on a final continue or a quit."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.channel = Channel(session)
        stream = cast(IO[str], self.channel)
        super().__init__(stdin=stream, stdout=stream, skip=_SKIP, nosigint=True)
        self.prompt = "(Pdb) "

    root: FrameType | None = None  # the task's outermost frame of user code

    def stop_here(self, frame: FrameType) -> bool:
        # Only inside the task: once its function returns, what runs next is the worker's.
        if not super().stop_here(frame):
            return False
        root = self.root
        f: FrameType | None = frame
        while f is not None and f is not root:
            f = f.f_back
        return root is None or f is root

    def get_stack(self, f: FrameType | None, t: TracebackType | None
                  ) -> tuple[list[tuple[FrameType, int]], int]:
        # ``w``, ``u`` and ``d`` see the task's frames, not the worker's below them.
        stack, i = super().get_stack(f, t)
        cut = next((n for n, (frame, _) in enumerate(stack) if frame is self.root), 0)
        if cut > i:
            cut = 0
        return stack[cut:], i - cut

    def setup(self, f: FrameType | None, tb: TracebackType | None) -> None:
        super().setup(f, tb)
        self.channel.sources(list(dict.fromkeys(
            frame.f_code.co_filename for frame, _ in self.stack
            if not frame.f_code.co_filename.startswith("<frozen"))))

    def _cmdloop(self) -> None:
        # pdb's own loop takes KeyboardInterrupt as "stop the command"; here it is a cancel
        # of the task (the node signals its worker), which must end the paused task.
        self.cmdloop()

    def set_continue(self) -> None:
        super().set_continue()
        if not self.breaks:
            self.session.close("continue")

    def set_quit(self) -> None:
        super().set_quit()
        self.session.close("quit")

    def do_interact(self, arg: str) -> None:
        assert self.curframe is not None
        ns = {**self.curframe.f_globals, **self.curframe_locals}
        _Console(self.channel, ns).interact("*interactive* (exit() or Ctrl-D to leave)", "")

    do_EOF = pdb.Pdb.do_quit


class Session:
    """One paused task: its listener, its store entry, its notice to the driver."""

    def __init__(self, worker: Any, reason: str, where: str) -> None:
        self.worker = worker
        client = worker.client
        ctx = client.ctx
        self.task_id: int = ctx.task_id
        self.name: str = worker.actor_label() or ctx.name or "driver"
        self.reason = reason
        self.where = where
        self.token = os.urandom(32)
        host = _bind_host(client.info)
        self.listener = socket.create_server((host, 0))
        self.info = {"task": hex_id(self.task_id), "name": self.name, "pid": os.getpid(),
                     "node": client.node_id, "host": host,
                     "port": self.listener.getsockname()[1], "token": self.token.hex(),
                     "where": where, "reason": reason, "job": hex_id(ctx.job),
                     "since": time.time()}
        self.closed = False
        self.pdb: RemotePdb | None = None
        self.key = f"{KV_PREFIX}{self.info['task']}:{os.getpid()}"

    def header(self) -> str:
        return (f"nbdist: task {self.name!r} paused at {self.reason} "
                f"(task {self.info['task']}, pid {self.info['pid']}, node "
                f"{str(self.info['node'])[:12]}) in {self.where}\n")

    def announce(self) -> None:
        client = self.worker.client
        try:
            client.control("kv_put", (self.key, self.info))
        except Exception:
            pass  # still reachable from the driver that submitted it
        self.worker.send_output(DEBUG_STREAM, json.dumps(self.info) + "\n")

    def accept(self) -> socket.socket | None:
        """The next client that proves the token, or None after one that did not."""
        conn, _ = self.listener.accept()
        try:
            conn = transport.accept_tls(conn)
            transport.server_handshake(conn, self.token)
        except (OSError, transport.TransportError):
            conn.close()
            return None
        return conn

    def close(self, how: str) -> None:
        if self.closed:
            return
        self.closed = True
        if self.pdb is not None:
            self.pdb.channel.end(how)
        self.listener.close()
        try:
            self.worker.client.control("kv_del", self.key)
        except Exception:
            pass
        self.worker.send_output(DEBUG_STREAM, json.dumps(
            {"task": self.info["task"], "pid": self.info["pid"], "end": how}) + "\n")


def _bind_host(info: dict[str, Any]) -> str:
    """The node's own host when it listens on TCP (other machines reach it), else loopback."""
    address = str(info.get("address") or "")
    if address.startswith("tcp:"):
        host = address[4:].rpartition(":")[0]
        if host and host not in ("0.0.0.0", "::"):
            return host
    return "127.0.0.1"


def _where(frame: FrameType) -> str:
    return f"{frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_name})"


# ------------------------------------------------------------------ entry points
_worker: Any = None
_sessions: dict[int, RemotePdb] = {}  # by thread: the session of the task it runs
_ENGINE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def install(worker: Any) -> None:
    """Make ``breakpoint()`` and ``pdb.set_trace()`` in this worker pause for a remote pdb."""
    global _worker
    _worker = worker
    sys.breakpointhook = breakpointhook
    pdb.set_trace = set_trace
    _listen_for_stacks()


def active() -> bool:
    return _worker is not None and bool(_worker.client.ctx.task_id)


def breakpointhook(*args: Any, **kwargs: Any) -> None:
    if os.environ.get("PYTHONBREAKPOINT") == "0":
        return
    set_trace(sys._getframe(1))


def set_trace(frame: FrameType | None = None, *, header: str | None = None) -> None:
    """Pause the running task at ``frame`` (the caller's by default) for a remote pdb."""
    frame = frame or sys._getframe(1)
    if not active():
        pdb.Pdb().set_trace(frame)
        return
    debugger = _sessions.get(threading.get_ident())
    if debugger is None or debugger.session.closed:
        session = Session(_worker, "a breakpoint", _where(frame))
        debugger = RemotePdb(session)
        session.pdb = debugger
        debugger.root = _task_root(frame)
        _sessions[threading.get_ident()] = debugger
        session.announce()
    debugger.set_trace(frame)


def _task_root(frame: FrameType) -> FrameType:
    """The outermost frame of the task's own code (below it, the worker's)."""
    root = frame
    f: FrameType | None = frame
    while f is not None:
        if _engine_file(f.f_code.co_filename):
            break
        root = f
        f = f.f_back
    return root


def _tb_root(tb: TracebackType) -> FrameType | None:
    """The first frame of the task's own code in a traceback."""
    t: TracebackType | None = tb
    while t is not None:
        if not _engine_file(t.tb_frame.f_code.co_filename):
            return t.tb_frame
        t = t.tb_next
    return None


def _engine_file(filename: str) -> bool:
    return filename.startswith(_ENGINE_DIR)


def task_ended() -> None:
    """The worker ends the task this thread ran: stop tracing, close a session left open
    (breakpoints set with ``b`` that were never reached again)."""
    debugger = _sessions.pop(threading.get_ident(), None)
    if debugger is not None:
        sys.settrace(None)
        debugger.session.close("continue")


def post_mortem(tb: TracebackType, exc: BaseException) -> None:
    """Stop at the frame that raised ``exc`` for a live post-mortem; returns when the user
    continues or quits (the task then fails with ``exc`` as it would have)."""
    frame = tb
    while frame.tb_next is not None:
        frame = frame.tb_next
    session = Session(_worker, f"its exception {type(exc).__name__}: {exc}",
                      _where(frame.tb_frame))
    debugger = RemotePdb(session)
    session.pdb = debugger
    debugger.root = _tb_root(tb)
    session.announce()
    debugger.reset()
    try:
        debugger.interaction(None, tb)
    except bdb.BdbQuit:
        pass
    session.close("continue")


POST_MORTEM_VARIABLES = ("NBDIST_DEBUG_POST_MORTEM", "RAY_DEBUG_POST_MORTEM")  # (Ray's name too)


def post_mortem_on() -> bool:
    return _worker is not None and (
        any(os.environ.get(name, "") not in ("", "0") for name in POST_MORTEM_VARIABLES)
        or bool(_worker.client.info.get("config", {}).get("debug_post_mortem")))


def on_failure(name: str, exc: BaseException) -> BaseException:
    """A task failed with ``exc``: with post-mortem on, stop at it first (a user error, not
    a cancel or a quit); returns the error the task ends with (see `explain`)."""
    user_error = not isinstance(exc, (bdb.BdbQuit, KeyboardInterrupt, SystemExit, TaskError))
    if exc.__traceback__ is not None and user_error:
        if post_mortem_on():
            try:
                post_mortem(exc.__traceback__, exc)
            except Exception:
                pass  # the task fails with its own error all the same
        # Its frames travel with it, for %debug / post_mortem on the driver.
        tb_snapshot.attach(exc, _engine_or_pickler)
    return explain(name, exc)


def _engine_or_pickler(filename: str) -> bool:
    return _engine_file(filename) or "cloudpickle" in filename


def explain(name: str, exc: BaseException) -> BaseException:
    """The error a task ended with: `DebuggerQuit` for pdb's ``q``, else ``exc``."""
    if isinstance(exc, bdb.BdbQuit):
        return DebuggerQuit(
            f"Task {name!r} was ended from the debugger (pdb's 'q'). Use 'c' to let a paused "
            "task run on to its result.")
    return exc


# ------------------------------------------------------------------ stacks on request
# A driver on this machine asks a worker for its stacks with STACKS_SIGNAL; the handler (run by
# the main thread between bytecodes: a long C call delays it) wakes the worker's
# "nbdist-stacks" thread through a pipe, which writes them as JSON to `stacks_file(pid)`; the
# driver reads and removes it.
STACKS_SIGNAL = signal.SIGUSR2


def stacks_file(pid: int) -> str:
    return os.path.join(tempfile.gettempdir(), f"nbdist-stacks-{os.getuid()}", f"{pid}.json")


def _serve_stacks(wake_r: int) -> None:
    while True:
        try:
            os.read(wake_r, 64)
        except OSError:
            return
        try:
            _write_stacks()
        except Exception:
            pass  # the driver waits for the file in vain and says so


def _write_stacks() -> None:
    path = stacks_file(os.getpid())
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    tmp = f"{path}.{threading.get_ident()}.tmp"
    with open(tmp, "w") as out:
        json.dump({"pid": os.getpid(), "threads": stacks()}, out)
    os.replace(tmp, path)


def stacks() -> dict[str, list[list[Any]]]:
    """The stack of every thread of this process running user code, by thread name: its
    frames (file, line, function, source line) outside nbdist's engine, outermost first."""
    names = {t.ident: t.name for t in threading.enumerate()}
    me = threading.get_ident()
    out: dict[str, list[list[Any]]] = {}
    for ident, frame in sys._current_frames().items():
        if ident == me:
            continue
        frames = [f for f in traceback.extract_stack(frame)
                  if not _engine_or_pickler(f.filename)]
        # From the first frame of the user's own code (not the stdlib's that runs a thread).
        first = next((i for i, f in enumerate(frames) if not f.filename.startswith(_STDLIB)
                      and not f.filename.startswith("<frozen")), None)
        if first is not None:
            out[names.get(ident, str(ident))] = [[f.filename, f.lineno, f.name, f.line or ""]
                                                 for f in frames[first:]]
    return out


_STDLIB = os.path.dirname(os.__file__)


def _listen_for_stacks() -> None:
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)

    def on_signal(signum: int, frame: Any) -> None:
        try:
            os.write(wake_w, b"x")
        except OSError:
            pass

    signal.signal(STACKS_SIGNAL, on_signal)
    threading.Thread(target=_serve_stacks, args=(wake_r,), name="nbdist-stacks",
                     daemon=True).start()

"""The guard of a local Ray started by ``init(backend="ray")``: this file, run as a script.

Ray ends its own processes at ``ray.shutdown()``, and its raylet and GCS die with a driver that
is killed; but two of its helpers (the dashboard agent and the runtime-env agent) can outlive a
SIGKILLed driver. So the driver starts this small process with a pipe on its stdin that only
the driver holds. When the pipe reaches EOF (the driver exited, however it died), the guard
waits ``GRACE_S`` for Ray to end by itself, then kills every process still tied to the Ray
session: those whose command line names the session directory, and those holding a file open
inside it (the agents, whose command lines Ray rewrites). Linux only (it reads /proc).
"""

from __future__ import annotations

import os
import signal
import sys
import time

GRACE_S = 5.0


def session_pids(session_dir: str, spare: set[int]) -> set[int]:
    """Live processes (other than ``spare``) tied to the Ray session at ``session_dir``."""
    found = set()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in spare:
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                if session_dir.encode() in fh.read():
                    found.add(int(name))
                    continue
            for fd in os.listdir(f"/proc/{name}/fd"):
                if os.readlink(f"/proc/{name}/fd/{fd}").startswith(session_dir):
                    found.add(int(name))
                    break
        except OSError:
            continue
    return found


def main(argv: list[str]) -> int:
    session_dir = os.path.realpath(argv[0])
    spare = {os.getpid(), os.getppid()}  # the driver itself, when it is still alive
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a notebook interrupt is not for us
    while sys.stdin.buffer.read(65536):
        pass
    deadline = time.monotonic() + GRACE_S
    while session_pids(session_dir, spare) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in session_pids(session_dir, spare):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Helpers of the train tests, used in the tests and inside training functions (pickled by
value, see conftest.py)."""

from __future__ import annotations

import os
import signal


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie counts as dead: it no longer runs)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def pids_in(directory: str) -> list[int]:
    """The pids training workers wrote as files ``pid-<n>`` into ``directory``."""
    return [int(name.split("-")[1]) for name in os.listdir(directory) if name.startswith("pid-")]


def kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)

"""Tying child processes to their parent's life (layer L0: stdlib only).

Two mechanisms, because each covers a gap of the other:

* ``PR_SET_PDEATHSIG`` (Linux): the kernel sends SIGKILL to the child when the thread that
  forked it dies. Quick, but tied to a *thread*, so it is only armed by callers that start
  children from a long-lived thread.
* A pipe from the parent: the child watches the read end; EOF means every holder of the write
  end is gone. Works everywhere, for grandchildren too, and is what the daemons select on.

`lower_priority` lets workers yield the CPU to the notebook and browser (``worker_nice``).

Stale shared-memory files (``nbdist-<pid>-...``: a node's arena, its object files, its writers'
warm files) of daemons that died without cleaning up are removed by `sweep_stale_shm` when a new
cluster starts; a daemon removes its own on the way out (`remove_shm_of`).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1


def lower_priority(nice: int) -> None:
    """Run this process at a lower CPU priority: ``nice`` added to its nice value. Where Linux
    shares the CPU between sessions first (autogroup, on most desktops), a nice value only
    ranks a process against the others of its session, so the process also starts a session
    of its own and gives that session the same nice value. Best effort: what the system does
    not allow is left as it was. (For a forked worker: it must not lead a process group.)"""
    if nice <= 0:
        return
    with contextlib.suppress(OSError):
        os.nice(nice)
    group = "/proc/self/autogroup"
    if not os.access(group, os.W_OK):
        return  # no autogroup, or not ours to set: a session of its own would only add weight
    try:
        os.setsid()
        with open(group, "w") as f:
            f.write(str(min(nice, 19)))
    except OSError:
        return


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent exits (Linux only)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:
        # The parent died before prctl took effect.
        os._exit(1)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_running(pid: int) -> bool:
    """True while ``pid`` runs: a process that exited but was not reaped yet (a zombie) does
    not count, unlike for `pid_alive`. Linux only (reads /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _named(parent: str, prefix: str) -> list[str]:
    """Names in folder ``parent`` that start with ``prefix`` (none if it cannot be read)."""
    try:
        return [name for name in os.listdir(parent) if name.startswith(prefix)]
    except OSError:
        return []


def sweep_stale_shm(shm_dir: str) -> int:
    """Remove ``nbdist-<pid>-*`` files whose daemon pid no longer runs; return how many."""
    removed = 0
    for name in _named(shm_dir, "nbdist-"):
        parts = name.split("-")
        if len(parts) < 3 or not parts[1].isdigit():
            continue
        if pid_alive(int(parts[1])):
            continue
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(shm_dir, name))
            removed += 1
    return removed


def remove_shm_of(shm_dir: str, node_pid: int) -> int:
    """Remove every shared-memory file of the node daemon ``node_pid``."""
    return remove_files_with_prefix(shm_dir, f"nbdist-{node_pid}-")


def remove_files_with_prefix(shm_dir: str, prefix: str) -> int:
    removed = 0
    for name in _named(shm_dir, prefix):
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(shm_dir, name))
            removed += 1
    return removed


def boot_id() -> str:
    """Identifies this machine's running kernel: processes with the same boot id share
    /dev/shm (one machine), whatever their network addresses."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        import socket

        return socket.gethostname()


SESSION_PREFIX = "nbdist-session-"
OWNER_FILE = "driver.pid"


def sweep_stale_sessions(parent: str, *, orphan_age_s: float = 3600.0) -> int:
    """Remove the folders of private clusters (``nbdist-session-*``, this user's) whose driver
    no longer runs: its daemons are gone with it, but a driver killed with SIGKILL cannot
    remove the folder itself. A folder without an owner file is removed once it is
    ``orphan_age_s`` old. Returns how many were removed."""
    import shutil

    removed = 0
    uid = os.getuid()
    now = time.time()
    for name in _named(parent, SESSION_PREFIX):
        path = os.path.join(parent, name)
        try:
            st = os.stat(path)
            if st.st_uid != uid:
                continue
            with open(os.path.join(path, OWNER_FILE)) as f:
                stale = not pid_alive(int(f.read().strip() or 0))
        except FileNotFoundError:
            stale = now - st.st_mtime > orphan_age_s
        except (OSError, ValueError):
            continue
        if stale:
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed


def sweep_stale_spill(parent: str) -> int:
    """Remove spill folders (``nbdist-spill-<pid>``) of node daemons that are gone."""
    import shutil

    removed = 0
    for name in _named(parent, "nbdist-spill-"):
        try:
            pid = int(name.rsplit("-", 1)[1])
        except ValueError:
            continue
        if not pid_alive(pid):
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
            removed += 1
    return removed

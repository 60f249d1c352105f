"""What the tests of prepared training workers observe from outside the cluster: which
processes under a driver have torch loaded (its shared library mapped), read from /proc."""

from __future__ import annotations

import os


def torch_processes(root: int) -> set[int]:
    """The live descendants of process ``root`` that have loaded torch."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                state, parent = f.read().rsplit(")", 1)[1].split()[:2]
        except OSError:  # ended meanwhile
            continue
        if state != "Z":
            children.setdefault(int(parent), []).append(int(entry))
    found: set[int] = set()
    pending = list(children.get(root, []))
    while pending:
        pid = pending.pop()
        pending.extend(children.get(pid, []))
        if _has_torch(pid):
            found.add(pid)
    return found


def _has_torch(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/maps") as f:
            return "libtorch" in f.read()
    except OSError:
        return False

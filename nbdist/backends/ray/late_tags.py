"""Output lines of nested tasks whose submission record has not reached the driver yet.

On Ray, the driver tags a remote output line with the notebook cell that caused it from the
task's id: it knows the tags of the tasks it submitted, and learns those of nested tasks from
the submission records their parents' workers send. A nested task runs in another worker, and
its lines come over that worker's own connection: under load they can reach the driver before
its parent's record does. Such a line (no tag known, while the driver tags output at all) waits
here until the record names its task, or for ``HOLD_S``, then goes on untagged.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

HOLD_S = 0.5


class LateTags:
    def __init__(self, emit: Callable[[list[Any]], None]) -> None:
        self.emit = emit
        self._lock = threading.Lock()
        self._held: dict[str, list[Any]] = {}
        self._timer: threading.Timer | None = None

    def hold(self, line: Any) -> None:
        with self._lock:
            self._held.setdefault(line.task_id, []).append(line)
            if self._timer is None:
                self._timer = threading.Timer(HOLD_S, self._expire)
                self._timer.daemon = True
                self._timer.start()

    def named(self, task_id: str, tag: str | None) -> list[Any]:
        """The lines held for ``task_id``, now that its submission record came: tagged."""
        with self._lock:
            lines = self._held.pop(task_id, None)
        if not lines:
            return []
        return [dataclasses.replace(line, submitter=tag) for line in lines]

    def _expire(self) -> None:
        with self._lock:
            lines = [line for held in self._held.values() for line in held]
            self._held.clear()
            self._timer = None
        if lines:
            lines.sort(key=lambda line: line.time)
            self.emit(lines)

    def close(self) -> None:
        with self._lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        self._expire()

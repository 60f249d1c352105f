"""fd readiness for the node's and head's single-threaded loop (layer L2, stdlib only)."""

from __future__ import annotations

import contextlib
import select
import selectors
from typing import Any

READ = selectors.EVENT_READ
WRITE = selectors.EVENT_WRITE


class Poller:
    """fd readiness for `Server`: epoll used directly where there is one (the `selectors`
    wrapper costs a few microseconds per wake-up, twice per task on a node), else `selectors`.
    `select` returns (data, READ|WRITE mask) pairs."""

    def __init__(self) -> None:
        self._ep = select.epoll() if hasattr(select, "epoll") else None
        self._sel = None if self._ep is not None else selectors.DefaultSelector()
        self._data: dict[int, Any] = {}

    @staticmethod
    def _fd(fileobj: Any) -> int:
        return fileobj if isinstance(fileobj, int) else fileobj.fileno()

    @staticmethod
    def _mask(events: int) -> int:
        return (select.EPOLLIN if events & READ else 0) | (
            select.EPOLLOUT if events & WRITE else 0)

    def register(self, fileobj: Any, events: int, data: Any) -> None:
        fd = self._fd(fileobj)
        if fd in self._data:
            # A number left by a file closed without `unregister`: the kernel has forgotten
            # it; so do we.
            self.unregister(fd)
        self._set(fd, events, data, new=True)

    def modify(self, fileobj: Any, events: int, data: Any) -> None:
        fd = self._fd(fileobj)
        if fd not in self._data:
            raise KeyError(f"{fd} is not registered")
        self._set(fd, events, data, new=False)

    def _set(self, fd: int, events: int, data: Any, new: bool) -> None:
        if self._ep is not None:
            (self._ep.register if new else self._ep.modify)(fd, self._mask(events))
        else:
            assert self._sel is not None
            (self._sel.register if new else self._sel.modify)(fd, events, data)
        self._data[fd] = data

    def unregister(self, fileobj: Any) -> None:
        fd = self._fd(fileobj)
        del self._data[fd]
        if self._ep is not None:
            with contextlib.suppress(OSError):
                self._ep.unregister(fd)
        else:
            assert self._sel is not None
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(fd)

    def select(self, timeout: float | None) -> list[tuple[Any, int]]:
        if self._ep is None:
            assert self._sel is not None
            return [(key.data, mask) for key, mask in self._sel.select(timeout)]
        try:
            ready = self._ep.poll(-1 if timeout is None else timeout)
        except InterruptedError:
            return []
        data = self._data
        out = []
        for fd, ev in ready:
            item = data.get(fd)
            if item is None:
                continue
            # As selectors does: an error or hang-up wakes both a reader and a writer.
            mask = (WRITE if ev & ~select.EPOLLIN else 0) | (READ if ev & ~select.EPOLLOUT else 0)
            out.append((item, mask))
        return out

    def close(self) -> None:
        if self._ep is not None:
            self._ep.close()
        elif self._sel is not None:
            self._sel.close()

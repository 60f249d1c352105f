"""tqdm_ray: progress bars in tasks and actors that the driver draws (Ray's
``ray.experimental.tqdm_ray``).

    task: tqdm.update() ── stdout line "<MAGIC>{json state}" ──▶ driver: output filter
                                                                   └─▶ renderer(state)

A bar in a task keeps its count locally and prints its state as one marked JSON line (at most
every ``flush_interval_s``, and always on ``close``). That line travels with the task's other
output (on nbdist's engine and on Ray), so no extra channel is needed. In the driver, importing
this module adds an output filter (`nbdist.events.add_output_filter`): marked lines are taken
out of the output and handed to the renderer, the rest go on to the output handler (a
notebook's) or are printed, as before. A filter stays when the output handler changes, so the
order of imports and ``%load_ext nbdist`` does not matter.

The renderer is a hook, ``set_renderer(fn)``: ``fn(state)`` gets each update, a dict with
``uuid``, ``desc``, ``total``, ``x`` (count), ``unit``, ``pos``, ``closed``, ``pid``, ``task``
(the task name; None for a driver's bar) and ``tag`` (the submitter tag of the task's root, e.g.
the notebook cell). The default draws one text line per update. A bar made in the driver
passes through the output filters as a line of its own, so every bar reaches the renderer the
same way. The notebook layer (``nbdist/jupyter/tqdm_view.py``) adds a filter of its own ahead of
this one that recognises the marked lines and draws each bar as a widget; the engine itself
imports no UI package.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid as _uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from nbdist import events

MAGIC = "__nbdist_tqdm_ray__"
DEFAULT_FLUSH_INTERVAL_S = 1.0

Renderer = Callable[[dict[str, Any]], None]


def _bar_text(state: dict[str, Any]) -> str:
    desc = state.get("desc") or ""
    x, total = state.get("x", 0), state.get("total")
    head = f"{desc}: " if desc else ""
    if total:
        frac = min(max(x / total, 0.0), 1.0)
        filled = int(frac * 20)
        bar = "#" * filled + " " * (20 - filled)
        text = f"{head}{frac * 100:3.0f}%|{bar}| {x}/{total}"
    else:
        text = f"{head}{x}it"
    where = f" [{state['task']} pid={state['pid']}]" if state.get("task") else ""
    return text + where + (" (done)" if state.get("closed") else "")


def text_renderer(state: dict[str, Any]) -> None:
    """The default renderer: one line per update on the driver's stdout."""
    try:
        sys.stdout.write(_bar_text(state) + "\n")
        sys.stdout.flush()
    except Exception:  # a closed stream must not break the thread that delivers output
        pass


_renderer: Renderer = text_renderer
_lock = threading.Lock()


def set_renderer(fn: Renderer | None) -> None:
    """Draw bars with ``fn(state)`` from now on (None: the default text lines)."""
    global _renderer
    _renderer = fn or text_renderer


def _render(state: dict[str, Any]) -> None:
    with _lock:
        _renderer(state)


def _parse(line: str) -> dict[str, Any] | None:
    at = line.find(MAGIC)
    if at < 0:
        return None
    try:
        state = json.loads(line[at + len(MAGIC):])
    except ValueError:
        return None
    return state if isinstance(state, dict) else None


def take_progress(lines: list[events.Output]) -> list[events.Output]:
    """The output filter: renders the bars' marked lines, returns the other lines."""
    rest = []
    for e in lines:
        state = _parse(e.line) if e.stream == "stdout" else None
        if state is None:
            rest.append(e)
        else:
            _render({**state, "task": e.name or None, "pid": e.worker_pid,
                     "tag": e.submitter})
    return rest


_installed = False


def install() -> None:
    """Take the bars' marked lines out of remote output in this driver (once)."""
    global _installed
    with _lock:
        if not _installed:
            events.add_output_filter(take_progress)
            _installed = True


def safe_print(*args: Any, **kwargs: Any) -> None:
    """Ray's print that does not break a bar. Bars are drawn by the driver's renderer, apart
    from the text around them, so a plain print cannot break one here."""
    print(*args, **kwargs)


def _in_task() -> bool:
    import nbdist

    if not nbdist.is_initialized():
        return False
    return nbdist.get_runtime_context().get_task_id() is not None


class tqdm:  # noqa: N801 - the name users know from tqdm and Ray
    """A progress bar: ``tqdm(iterable, desc=..., total=...)`` to iterate, or ``update(n)``
    by hand; ``close()`` (or the end of the iteration) marks it done."""

    def __init__(self, iterable: Iterable[Any] | None = None, desc: str | None = None,
                 total: int | None = None, unit: str | None = None,
                 position: int | None = None,
                 flush_interval_s: float | None = None) -> None:
        if total is None and iterable is not None:
            try:
                total = len(iterable)  # type: ignore[arg-type]
            except (TypeError, AttributeError):
                total = None
        self._iterable = iterable
        self._desc = desc or ""
        self._total = total
        self._unit = unit or "it"
        self._x = 0
        self._pos = position
        self._uuid = _uuid.uuid4().hex
        self._closed = False
        self._interval = (DEFAULT_FLUSH_INTERVAL_S if flush_interval_s is None
                          else flush_interval_s)
        self._last_flush = 0.0
        self._remote = _in_task()
        self._flush(force=True)

    def _state(self) -> dict[str, Any]:
        return {"uuid": self._uuid, "desc": self._desc, "total": self._total, "x": self._x,
                "unit": self._unit, "pos": self._pos, "closed": self._closed,
                "pid": os.getpid()}

    def _flush(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_flush < self._interval:
            return
        self._last_flush = now
        line = MAGIC + json.dumps(self._state())
        if self._remote:
            print(line, flush=True)
            return
        # A driver's bar goes through the same output filters as a task's, so a notebook
        # layer that draws the bars draws this one too (in the cell running now).
        own = events.Output(time.time(), "", "", os.getpid(), "stdout", line,
                            events.current_submitter())
        if events.filter_output([own]):
            _render(self._state())

    def set_description(self, desc: str) -> None:
        self._desc = desc
        self._flush()

    def update(self, n: int = 1) -> None:
        """Count ``n`` more steps."""
        self._x += n
        self._flush()

    def refresh(self) -> None:
        self._flush(force=True)

    def close(self) -> None:
        """Mark the bar done (its final count is always shown)."""
        if self._closed:
            return
        self._closed = True
        self._flush(force=True)

    @property
    def n(self) -> int:
        return self._x

    @property
    def total(self) -> int | None:
        return self._total

    def __iter__(self) -> Iterator[Any]:
        if self._iterable is None:
            raise ValueError("No iterable provided")
        for item in self._iterable:
            yield item
            self.update(1)
        self.close()

    def __enter__(self) -> tqdm:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if not _in_task():
    install()

"""tqdm_ray: progress bars in tasks and actors that the driver draws (Ray's
``ray.experimental.tqdm_ray``).

    task: tqdm.update() ── stdout line "<MAGIC>{json state}" ──▶ driver: output handler
                                                                   └─▶ renderer(state)

A bar in a task keeps its count locally and prints its state as one marked JSON line (at most
every ``flush_interval_s``, and always on ``close``). That line travels with the task's other
output (on nbdist's engine and on Ray), so no extra channel is needed. In the driver, importing
this module chains a filter in front of the output handler (`nbdist.events.set_output_handler`):
marked lines are taken out of the output and handed to the renderer, the rest go on as before.
A bar made in the driver itself renders directly.

The renderer is a hook, ``set_renderer(fn)``: ``fn(state)`` gets each update, a dict with
``uuid``, ``desc``, ``total``, ``x`` (count), ``pos``, ``closed``, ``task`` (the task name, for
remote bars) and ``pid``. The default draws one text line per update. A notebook front end
may install a widget renderer here; the engine itself imports no UI package.
Limitation: the filter must be installed after a notebook layer sets its own output handler
(import this module after ``%load_ext nbdist``), or marked lines show as plain output.
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


def _echo(lines: list[events.Output]) -> None:
    """What the driver prints for lines no handler took (as nbdist's own output printing)."""
    for e in lines:
        out = sys.stderr if e.stream == "stderr" else sys.stdout
        try:
            out.write(f"({e.name} pid={e.worker_pid}) {e.line}\n")
            out.flush()
        except Exception:
            pass


def _make_filter(previous: Any) -> Any:
    def take_progress(lines: list[events.Output]) -> bool:
        rest = []
        for e in lines:
            state = _parse(e.line) if e.stream == "stdout" else None
            if state is None:
                rest.append(e)
            else:
                _render({**state, "task": e.name, "pid": e.worker_pid})
        if not rest:
            return True
        if previous is not None and previous(rest):
            return True
        _echo(rest)
        return True

    take_progress.nbdist_tqdm_previous = previous  # type: ignore[attr-defined]
    return take_progress


def install() -> None:
    """Put the progress filter in front of the current output handler (once)."""
    current = events.output_handler()
    if current is not None and hasattr(current, "nbdist_tqdm_previous"):
        return
    events.set_output_handler(_make_filter(current))


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
        if self._remote:
            print(MAGIC + json.dumps(self._state()), flush=True)
        else:
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

"""Records from Ray workers to the driver: remote output lines and nested submissions.

::

    worker (worker.Outbox) ──push(records)──▶ OutputSink actor ◀──pull(timeout)── driver
                                               (named, 0 CPUs,                  (OutputPump
                                                one per driver)                  thread)

Ray has no channel from a worker back to one driver that a notebook could route by cell, so
the driver makes one: a small async actor, named after the driver's job, that buffers records.
Workers find it by name; the driver's pump thread long-polls it (``pull`` returns as soon as
records arrive, or after ``timeout``) and turns the records into `nbdist.events` (`Output`
routed by its submitter tag, `TaskSubmitted` of nested tasks). It works the same on a local
Ray, a multi-node cluster and through Ray Client, because it uses only actor calls.

The sink keeps at most ``MAX_BUFFERED`` records: if the driver stops pulling, the oldest are
dropped (and counted), never the worker blocked. The driver closes the sink at shutdown, which
ends the pump's pending pull at once.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

MAX_BUFFERED = 100_000
PULL_TIMEOUT_S = 2.0


class OutputSink:
    """The actor (created with ``ray.remote(OutputSink)``); all methods run on its loop."""

    def __init__(self) -> None:
        self.records: list[tuple] = []
        self.dropped = 0
        self.pushed = 0  # records ever pushed (delivered or dropped)
        self.closed = False
        self.arrived: asyncio.Event | None = None

    def _event(self) -> asyncio.Event:
        if self.arrived is None:
            self.arrived = asyncio.Event()
        return self.arrived

    async def push(self, records: list[tuple]) -> None:
        self.pushed += len(records)
        self.records.extend(records)
        extra = len(self.records) - MAX_BUFFERED
        if extra > 0:
            del self.records[:extra]
            self.dropped += extra
        self._event().set()

    async def pull(self, timeout: float) -> tuple[list[tuple], int, bool]:
        event = self._event()
        if not self.records and not self.closed:
            try:
                await asyncio.wait_for(event.wait(), timeout)
            except asyncio.TimeoutError:
                pass
        event.clear()
        records, self.records = self.records, []
        dropped, self.dropped = self.dropped, 0
        return records, dropped, self.closed

    async def count(self) -> int:
        return self.pushed

    async def close(self) -> None:
        self.closed = True
        self._event().set()


class OutputPump:
    """The driver's thread that pulls the sink and hands each batch to ``on_records``."""

    def __init__(self, sink: Any, on_records: Callable[[list[tuple], int], None]) -> None:
        self.sink = sink
        self.on_records = on_records
        self._stop = False
        self._delivered = 0
        self._progress = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="nbdist-ray-output",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        import ray

        while not self._stop:
            try:
                records, dropped, closed = ray.get(self.sink.pull.remote(PULL_TIMEOUT_S))
            except Exception:
                if not self._stop:
                    log.warning("nbdist: lost the output sink; remote output of this "
                                "session no longer reaches the driver", exc_info=True)
                return
            if records or dropped:
                try:
                    self.on_records(records, dropped)
                except Exception:
                    log.exception("nbdist: handling remote output failed")
                with self._progress:
                    self._delivered += len(records) + dropped
                    self._progress.notify_all()
            if closed:
                return

    def sync(self, timeout: float = 2.0) -> None:
        """Return once every record the sink had when called has been handed on (workers
        push a call's output before the call returns, so after a `get` this puts the output
        of the tasks it waited for in front of whatever the caller does next)."""
        import ray

        deadline = time.monotonic() + timeout
        try:
            target = ray.get(self.sink.count.remote(), timeout=timeout)
        except Exception:
            return
        with self._progress:
            while self._delivered < target and not self._stop:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._progress.wait(left)

    def stop(self, timeout: float = 5.0) -> None:
        """Close the sink (ending the pending pull) and wait for the last records."""
        self._stop = True
        try:
            self.sink.close.remote()
        except Exception:
            return
        if self._thread.is_alive():
            self._thread.join(timeout)

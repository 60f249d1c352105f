"""Records from Ray workers to the driver: remote output lines and nested submissions.

::

    worker (worker.Outbox) ──("rec", records, ack?)──▶ OutputServer     (a thread of the
                           ◀──────── ("ack",) ──────── (server.Server) driver process)

Ray has no channel from a worker back to one driver that a notebook could route by cell, so
the driver opens one: `OutputServer`, an authenticated `nbdist.wire.transport` server on a thread of
the driver. Each call's context carries its address and a secret made for this driver; a worker
connects once, sends batches of records, and a call that printed asks for an acknowledgement,
which the server sends after it handed the records on (`nbdist.events`: `Output` routed by its
submitter tag, `TaskSubmitted` of nested tasks). So a task's output is with the driver before
its result is, with no extra round trip in ``get``.

The sink lives in the driver on purpose: as a Ray actor it held one of Ray's pooled worker
processes for the whole session, and the first parallel tasks after ``init`` (on a 2-core
machine, every parallel round for a while) waited for Ray to start a replacement worker.

It listens on loopback for a Ray that ``init`` started here; attached to a cluster, on this
machine's Ray node address (workers on other nodes already reach the driver there: Ray's
owners are called back by their borrowers). Through Ray Client the driver cannot be reached
from the cluster, so there the sink is `OutputSink`, a small named async actor (0 CPUs) that
buffers records, long-polled by the driver's `OutputPump`; it keeps at most ``MAX_BUFFERED``
records (the oldest are dropped, and counted, if the driver stops pulling).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from nbdist.wire import server, transport

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


class OutputServer:
    """The driver's sink (see the module docstring): records in, acknowledgements out."""

    def __init__(self, host: str, on_records: Callable[[list[tuple], int], None]) -> None:
        self.on_records = on_records
        self.secret = os.urandom(32)
        self._server = server.Server(self.secret, self._on_messages, lambda peer: None)
        listener = transport.listen(f"tcp:{host}:0")
        self.address = transport.bound_address(listener)
        self._server.add_listener(listener)
        self._thread = threading.Thread(target=self._server.run, name="nbdist-ray-output",
                                        daemon=True)

    @property
    def target(self) -> tuple[str, bytes]:
        """What a call's context names as its sink (worker.Outbox connects to it)."""
        return self.address, self.secret

    def start(self) -> None:
        self._thread.start()

    def _on_messages(self, peer: server.Peer, msgs: list[Any]) -> None:
        for msg in msgs:
            if not (isinstance(msg, tuple) and msg and msg[0] == "rec"):
                self._server.drop(peer, "unexpected message on the output sink")
                return
            _, records, ack = msg
            try:
                self.on_records(records, 0)
            except Exception:
                log.exception("nbdist: handling remote output failed")
            if ack:
                self._server.send(peer, ("ack",))

    def sync(self, timeout: float = 2.0) -> None:
        """Nothing to wait for: a call that printed had its records acknowledged, after they
        were handed on, before it returned."""

    def stop(self, timeout: float = 5.0) -> None:
        self._server.stop()
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._server.close()

"""``ray.tests.client_test_utils``, which Ray's wheel leaves out: the one helper the core tests
use, written on the public API (it works on Ray and on nbdist)."""

import asyncio
from typing import Any


def create_remote_signal_actor(ray: Any) -> Any:
    """A signal actor class of ``ray``'s: ``wait`` blocks until ``send`` is called."""

    @ray.remote
    class SignalActor:
        def __init__(self) -> None:
            self.ready_event = asyncio.Event()

        def send(self, clear: bool = False) -> None:
            self.ready_event.set()
            if clear:
                self.ready_event.clear()

        async def wait(self, should_wait: bool = True) -> None:
            if should_wait:
                await self.ready_event.wait()

    return SignalActor

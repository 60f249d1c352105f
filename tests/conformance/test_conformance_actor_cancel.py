"""``cancel`` on a running method of an async actor, on both backends: the method's coroutine
gets CancelledError and ``get`` raises TaskCancelledError (Ray's ``actors.py`` documentation
example). The actor is new, so its first calls are the ones cancelled: nbdist sends them
through the node, before a direct link to the actor's worker exists."""

from __future__ import annotations

import asyncio

import pytest
from polling import poll

import nbdist
from nbdist.exceptions import TaskCancelledError

pytestmark = pytest.mark.timeout(120)


@nbdist.remote
class Napper:
    def __init__(self):
        self.started = False
        self.outcome = "not ended"

    async def nap(self):
        self.started = True
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.outcome = "cancelled"
            raise
        self.outcome = "slept"

    async def state(self):
        return self.started, self.outcome


def test_cancel_stops_a_running_async_method(backend) -> None:
    napper = Napper.remote()
    ref = napper.nap.remote()
    poll(lambda: nbdist.get(napper.state.remote())[0], what="the method to start")
    nbdist.cancel(ref)
    with pytest.raises(TaskCancelledError):
        nbdist.get(ref, timeout=30)
    assert nbdist.get(napper.state.remote()) == (True, "cancelled")

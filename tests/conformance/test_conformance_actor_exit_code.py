"""Actors that crash, on both backends. ``sys.exit(1)`` in a method is a crash, so an
actor with restarts left comes back and the call is retried (Ray's
``actor_checkpointing.py``: an "immortal" actor that exits with 1 at random and restores
its state from a file), and ``max_restarts=-1`` restarts it however often it crashes.
``sys.exit(0)`` ending the actor for good is pinned in ``test_conformance_actor_extras.py``."""

from __future__ import annotations

import os
import sys

import pytest

import nbdist

pytestmark = pytest.mark.timeout(120)


@nbdist.remote(max_restarts=1, max_task_retries=1)
class FailsOnce:
    def __init__(self, marker: str):
        self.marker = marker

    def work(self):
        if not os.path.exists(self.marker):
            with open(self.marker, "w"):
                pass
            sys.exit(1)
        return "done after a restart"


def test_a_nonzero_exit_restarts_the_actor_and_retries_the_call(backend, tmp_path) -> None:
    actor = FailsOnce.remote(str(tmp_path / "exited-once"))
    assert nbdist.get(actor.work.remote(), timeout=60) == "done after a restart"


@nbdist.remote(max_restarts=-1, max_task_retries=-1)
class Immortal:
    def __init__(self, counter: str):
        self.counter = counter

    def work(self):
        with open(self.counter, "a+") as f:
            f.seek(0)
            crashes = len(f.read())
            if crashes < 3:
                f.write("x")
                f.flush()
                os._exit(1)
        return crashes


def test_max_restarts_minus_one_restarts_without_limit(backend, tmp_path) -> None:
    actor = Immortal.remote(str(tmp_path / "crashes"))
    assert nbdist.get(actor.work.remote(), timeout=60) == 3

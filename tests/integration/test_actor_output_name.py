"""An actor whose class defines ``__repr__`` prints under that name, as in Ray: its output
records (``Output.name``) carry the repr as it is when the line is printed, so a library can
name an actor by what it runs now (a trial: ``Trial(<trial id>)``) and the notebook can tell
whose lines they are. Actors without their own repr keep the method's name."""

from __future__ import annotations

from typing import Any

import polling
import pytest

import nbdist
from nbdist import events

pytestmark = pytest.mark.timeout(60)


@nbdist.remote
class Labelled:
    def __init__(self) -> None:
        self.label = "Trial(idle)"

    def __repr__(self) -> str:
        return self.label

    def run(self, trial_id: str) -> None:
        self.label = f"Trial({trial_id})"
        print(f"line of {trial_id}")


@nbdist.remote
class Plain:
    def run(self) -> None:
        print("plain line")


def test_output_lines_carry_the_actors_own_repr(cluster: dict[str, Any]) -> None:
    seen: list[events.Output] = []
    unsubscribe = events.subscribe(seen.extend, ["stdout"])
    try:
        actor, plain = Labelled.remote(), Plain.remote()
        nbdist.get([actor.run.remote("a_00001"), plain.run.remote()])
        nbdist.get(actor.run.remote("a_00002"))

        def names() -> dict[str, str] | None:
            events.bus().flush()
            got = {e.line: e.name for e in seen}
            return got if len(got) >= 3 else None
        got = polling.poll(names, timeout=20, what="three output records")
    finally:
        unsubscribe()
    assert got["line of a_00001"] == "Trial(a_00001)"
    assert got["line of a_00002"] == "Trial(a_00002)"
    assert got["plain line"] == "Plain.run"

"""Step-through mode, the public side (layer L3): for a class watching a DAG unfold.

    step_mode(True)          from now on the node holds each of this driver's tasks (nested
                             ones included) when its arguments are ready, instead of running it
    step(n=1)                release the n tasks held longest; step("level") releases every
                             held task: the DAG's ready set. Waits until they have ended
                             (``wait=False``: returns at once), so the next step sees the next
                             level held
    step_mode(False)         release everything held and stop holding ("Run")
    with step_mode(): ...    on for the block; off (everything released) after it

Each returns a `StepStatus`: whether the mode is on, how many tasks are still held, and
the tasks this call released. The hold lives in the node's scheduler
(`nbdist.scheduler.stepping`), so dependencies, actors' call order, ``get`` and ``wait`` keep
their meaning: a ``get`` of a held task's ref simply waits. Actor calls go through the node
while the mode is on (not over direct links), so the node can hold them too.

The node publishes ``task_held`` and ``step_mode`` records on the event stream: that is how
the panel draws held tasks. Nothing is held while the mode is off; the node tests one set per
task. Only nbdist's own engine has the mode: on ``backend="ray"`` these raise
`StepModeUnavailable` (the ``%nbdist step`` magics print that and go on, so a teaching notebook
that steps still runs there, each task as it is submitted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nbdist.backends.base import current
from nbdist.backends.local import LocalBackend
from nbdist.driver import runtime
from nbdist.exceptions import NbdistError, StepModeUnavailable
from nbdist.ids import hex_id
from nbdist.wire import protocol as P


@dataclass(frozen=True)
class StepStatus:
    """The step-through mode after a call: ``on``, ``held`` (tasks still held), ``released``
    (``(task id, function name)`` of each task the call released, in release order)."""

    on: bool
    held: int
    released: tuple[tuple[str, str], ...] = ()

    def __enter__(self) -> StepStatus:
        return self

    def __exit__(self, *exc: Any) -> None:
        step_mode(False)


def _client() -> runtime.CoreClient:
    if not isinstance(current.backend, LocalBackend):
        raise StepModeUnavailable(
            "Step-through mode is a feature of nbdist's own engine; this session runs on "
            "backend='ray'. Call nbdist.init() (the default backend) to use step_mode().")
    client = runtime.current()
    if client.mode != P.KIND_DRIVER:
        raise NbdistError("step_mode() and step() are for the driver (the notebook), "
                          "not for code running in a task or an actor.")
    return client


def _status(reply: dict[str, Any]) -> StepStatus:
    return StepStatus(bool(reply["on"]), int(reply["held"]),
                      tuple((hex_id(tid), name) for tid, name in reply["released"]))


def step_mode(on: bool = True) -> StepStatus:
    """Hold this driver's tasks before they run (``on``), or release them all and stop (Run)."""
    return _status(_client().step(bool(on), 0, False))


def step(n: int | str = 1, *, wait: bool = True) -> StepStatus:
    """Release the ``n`` tasks held longest, or ``"level"``: every task held now (the ready
    set of the DAG). With ``wait``, return once the released tasks have ended."""
    if n != "level":
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"step() releases a positive number of tasks or 'level', not {n!r}.")
    return _status(_client().step(None, n, wait))

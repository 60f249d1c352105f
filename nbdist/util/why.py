"""Why a ``get``/``wait`` waits: the chain from its refs down to the cause (public API).

    why(wait_id=None) -> str   about the newest get/wait of this driver still blocked (else
                               the newest one): for each value not ready, what its task is
                               doing and, if it is not running, what holds it

Built on the event stream only (`nbdist.events.recent`) plus the cluster's free and total
resources, so it explains what the stream recorded (`config.event_buffer` records back):

- running: for how long, where (``%nbdist stack`` shows the line it is on);
- paused in the debugger (``%nbdist debug`` attaches), or held by step-through mode;
- waiting for its arguments: the same, one level down, for each task that makes one;
- an actor's call whose actor died: the actor and why it died;
- ready to run but not started: pending for resources, with what is free of what, and who
  holds them (running tasks with their run time, live actors); or queued behind the calls
  its actor runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from nbdist import events as ev

MAX_DEPTH = 4


@dataclass
class _Task:
    name: str
    deps: tuple[str, ...]
    actor: str | None
    state: str = "submitted"  # started, finished, failed, held, paused
    since: float = 0.0
    node: str = ""
    pid: int = 0
    where: str = ""


@dataclass
class _Fold:
    tasks: dict[str, _Task] = field(default_factory=dict)
    maker: dict[str, str] = field(default_factory=dict)  # object id -> task id
    actors: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # id -> class, death
    waits: dict[int, tuple[ev.WaitBegun, bool]] = field(default_factory=dict)

    def add(self, e: Any) -> None:
        if isinstance(e, ev.TaskSubmitted):
            self.tasks[e.task_id] = _Task(e.name, tuple(e.deps), e.actor_id, since=e.time)
            for oid in e.returns:
                self.maker[oid] = e.task_id
        elif isinstance(e, ev.ActorCreated):
            self.actors[e.actor_id] = (e.class_name, None)
        elif isinstance(e, ev.ActorDied):
            self.actors[e.actor_id] = (self.actors.get(e.actor_id, ("?", None))[0], e.reason)
        elif isinstance(e, ev.WaitBegun):
            self.waits[e.wait_id] = (e, False)
        elif isinstance(e, ev.WaitDone) and e.wait_id in self.waits:
            self.waits[e.wait_id] = (self.waits[e.wait_id][0], True)
        else:
            self._task_state(e)

    def _task_state(self, e: Any) -> None:
        task = self.tasks.get(getattr(e, "task_id", ""))
        if task is None:
            return
        if isinstance(e, ev.TaskStarted):
            task.state, task.since, task.node, task.pid = "started", e.time, e.node_id, e.worker_pid
        elif isinstance(e, ev.TaskFinished):
            task.state = "finished"
        elif isinstance(e, ev.TaskFailed):
            task.state = "failed"
        elif isinstance(e, ev.TaskHeld):
            task.state = "held"
        elif isinstance(e, ev.TaskPaused):
            task.state, task.where = ("paused", e.where) if e.paused else ("started", "")


def _fold() -> _Fold:
    fold = _Fold()
    for e in ev.recent():
        fold.add(e)
    return fold


def why(wait_id: int | None = None) -> str:
    """See the module docstring."""
    fold = _fold()
    if not fold.waits:
        return "No get() or wait() of this driver is in the event history."
    if wait_id is None:
        blocked = [w for w, (_, done) in fold.waits.items() if not done]
        wait_id = max(blocked) if blocked else max(fold.waits)
    if wait_id not in fold.waits:
        return f"get()/wait() {wait_id} is not in the event history (any longer)."
    begun, done = fold.waits[wait_id]
    age = time.time() - begun.time
    head = (f"The {'last' if done else 'blocked'} {begun.call}() (begun {age:.0f} s ago"
            f"{', ended' if done else ''}) waits for {begun.num_returns} of "
            f"{len(begun.object_ids)} value(s):")
    lines = [head]
    pending = 0
    for oid in begun.object_ids:
        task_id = fold.maker.get(oid)
        if task_id is None:
            continue
        task = fold.tasks[task_id]
        if task.state == "finished":
            continue
        pending += 1
        _explain(fold, task_id, 1, lines, set())
    if not pending:
        lines.append("  every value it waits for is ready (or was made outside this history).")
    return "\n".join(lines)


def _explain(fold: _Fold, task_id: str, depth: int, lines: list[str], seen: set[str]) -> None:
    task = fold.tasks[task_id]
    pad = "  " * depth
    label = f"{pad}{task.name!r} ({task_id[:18]})"
    now = time.time()
    if task_id in seen or depth > MAX_DEPTH:
        lines.append(f"{label}: see above")
        return
    seen.add(task_id)
    if task.state == "failed":
        lines.append(f"{label}: failed (the get raises its error)")
    elif task.state == "paused":
        lines.append(f"{label}: paused in the debugger at {task.where} (%nbdist debug "
                     "attaches)")
    elif task.state == "held":
        lines.append(f"{label}: held by step-through mode (%nbdist step releases it, "
                     "%nbdist run releases all)")
    elif task.state == "started":
        lines.append(f"{label}: running for {now - task.since:.0f} s on node {task.node[:12]} "
                     f"(pid {task.pid}; %nbdist stack shows where)")
    else:
        _explain_pending(fold, task_id, depth, lines, seen)


def _explain_pending(fold: _Fold, task_id: str, depth: int, lines: list[str],
                     seen: set[str]) -> None:
    task = fold.tasks[task_id]
    pad = "  " * depth
    label = f"{pad}{task.name!r} ({task_id[:18]})"
    dead = fold.actors.get(task.actor or "", ("", None))
    if task.actor and dead[1] is not None:
        lines.append(f"{label}: its actor {dead[0]} ({task.actor[:12]}) died: {dead[1]}")
        return
    waiting = [fold.maker[d] for d in task.deps
               if d in fold.maker and fold.tasks[fold.maker[d]].state != "finished"]
    if waiting:
        lines.append(f"{label}: waits for its argument(s):")
        for dep in dict.fromkeys(waiting):
            _explain(fold, dep, depth + 1, lines, seen)
        return
    if task.actor:
        busy = [t for t in fold.tasks.values() if t.actor == task.actor and t.state == "started"]
        if busy:
            lines.append(f"{label}: queued behind its actor's running call(s): "
                         + ", ".join(f"{t.name!r} for {time.time() - t.since:.0f} s"
                                     for t in busy))
            return
    lines.append(f"{label}: pending for {time.time() - task.since:.0f} s, not started: "
                 f"{_resources(fold)}")


def _resources(fold: _Fold) -> str:
    import nbdist

    try:
        free, total = nbdist.available_resources(), nbdist.cluster_resources()
    except Exception:
        return "waiting for a worker or resources"
    shown = ", ".join(f"{k} {free.get(k, 0):g}/{v:g}" for k, v in sorted(total.items())
                      if "memory" not in k and not k.startswith("node:"))
    now = time.time()
    holders = [f"task {t.name!r} running for {now - t.since:.0f} s"
               for t in fold.tasks.values() if t.state == "started" and not t.actor]
    holders += [f"actor {cls}" for cls, death in fold.actors.values() if death is None]
    held = f"; held by {', '.join(holders)}" if holders else ""
    return f"its resources are not free (free/total: {shown}){held}"

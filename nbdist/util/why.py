"""Why a ``get``/``wait`` waits: the chain from its refs down to the cause (public API).

    why(wait_id=None) -> str   about the newest get/wait of this driver (its user's, not a
                               library's): for each value not ready, what its task is doing
                               and, if it is not running, what holds it

Built on the event stream only (`nbdist.events.recent`) plus the cluster's free and total
resources and its placement groups (`placement_group_table`), so it explains what the stream
recorded (`config.event_buffer` records back):

- running: for how long, where (``%nbdist stack`` shows the line it is on);
- paused in the debugger (``%nbdist debug`` attaches), or held by step-through mode;
- waiting for its arguments: the same, one level down, for each task that makes one;
- an actor's call whose actor died (the actor and why it died) or is restarting;
- failed: with its error, and the dead actor behind it when an actor's death failed it;
- done, but its value spilled to disk and not read back yet: the get restores it;
- a placement group's ``ready()`` not done: the group is not placed yet (its bundles and
  strategy, with what is free of what); other tasks not started while a group is pending
  name it too;
- ready to run but not started: pending for resources, with what is free of what, and who
  holds them (running tasks with their run time, live actors); or queued behind the calls
  its actor runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
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
    error: str = ""
    library: str = ""  # the library whose call it is ("placement_group": a ready() check)


@dataclass
class _Fold:
    tasks: dict[str, _Task] = field(default_factory=dict)
    maker: dict[str, str] = field(default_factory=dict)  # object id -> task id
    actors: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # id -> class, death
    restarting: dict[str, int] = field(default_factory=dict)  # actor id -> restarts
    spilled: dict[str, tuple[int, str]] = field(default_factory=dict)  # object -> size, node
    waits: dict[int, tuple[ev.WaitBegun, bool]] = field(default_factory=dict)
    cluster: Cluster | None = None

    def add(self, e: Any) -> None:
        if isinstance(e, ev.TaskSubmitted):
            self.tasks[e.task_id] = _Task(e.name, tuple(e.deps), e.actor_id, since=e.time,
                                          library=(e.library_call or ("",))[0])
            for oid in e.returns:
                self.maker[oid] = e.task_id
        elif isinstance(e, ev.ActorCreated):
            self.actors[e.actor_id] = (e.class_name, None)
        elif isinstance(e, ev.ActorRestarted):
            self.restarting[e.actor_id] = e.restarts
        elif isinstance(e, ev.ActorDied):
            self.actors[e.actor_id] = (self.actors.get(e.actor_id, ("?", None))[0], e.reason)
        elif isinstance(e, ev.ObjectSpilled):
            self.spilled[e.object_id] = (e.size, e.node_id)
        elif isinstance(e, (ev.ObjectRestored, ev.ObjectFreed)):
            self.spilled.pop(e.object_id, None)
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
        if task.actor in self.restarting:
            del self.restarting[task.actor]  # a call of it runs (or ends): it is back
        if isinstance(e, ev.TaskStarted):
            task.state, task.since, task.node, task.pid = "started", e.time, e.node_id, e.worker_pid
        elif isinstance(e, ev.TaskFinished):
            task.state = "finished"
        elif isinstance(e, ev.TaskFailed):
            task.state = "failed"
            task.error = f"{e.error_type}: {(e.message or '').strip().splitlines()[0][:200]}" \
                if (e.message or "").strip() else e.error_type
        elif isinstance(e, ev.TaskHeld):
            task.state = "held"
        elif isinstance(e, ev.TaskPaused):
            task.state, task.where = ("paused", e.where) if e.paused else ("started", "")


@dataclass
class Cluster:
    """What `why` reads of the cluster besides the event stream (each a call: read only when
    an explanation needs it)."""
    available: Callable[[], dict[str, float]]
    total: Callable[[], dict[str, float]]
    placement_groups: Callable[[], dict[str, Any]]


def _live_cluster() -> Cluster:
    import nbdist
    from nbdist.util.placement_group import placement_group_table

    return Cluster(nbdist.available_resources, nbdist.cluster_resources, placement_group_table)


def _fold(records: Iterable[Any]) -> _Fold:
    fold = _Fold()
    for e in records:
        fold.add(e)
    return fold


def why(wait_id: int | None = None) -> str:
    """See the module docstring."""
    return explain(ev.recent(), wait_id, _live_cluster())


def explain(records: Iterable[Any], wait_id: int | None, cluster: Cluster) -> str:
    """`why`'s answer from these event records and this cluster state."""
    fold = _fold(records)
    fold.cluster = cluster
    if not fold.waits:
        return "No get() or wait() of this driver is in the event history."
    if wait_id is None:
        # The newest of the user's own (a library's controller waits too): the one blocked now
        # when asked from another thread, else the last one a cell made.
        own = [w for w, (begun, _) in fold.waits.items() if begun.library_call is None]
        wait_id = max(own or fold.waits)
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
        if oid in fold.spilled and not done:
            size, node = fold.spilled[oid]
            made = f"{fold.tasks[task_id].name!r} ({task_id[:18]})" if task_id else "put"
            lines.append(f"  {made}: done, but its value ({size / 1e6:.1f} MB) is spilled to "
                         f"disk on node {node[:12]}: being restored into memory for the get")
            pending += 1
            continue
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
        dead = fold.actors.get(task.actor or "", ("", None))
        cause = (f"; its actor {dead[0]} ({(task.actor or '')[:12]}) died: {dead[1]}"
                 if task.actor and dead[1] is not None else "")
        lines.append(f"{label}: failed with {task.error or 'an error'} (the get raises it)"
                     f"{cause}")
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
    if task.actor and task.actor in fold.restarting:
        lines.append(f"{label}: its actor {fold.actors.get(task.actor, ('?', None))[0]} "
                     f"({task.actor[:12]}) is restarting (restart "
                     f"{fold.restarting[task.actor]}); the call runs once it is back")
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
    groups = _pending_groups(fold)
    if task.library == "placement_group":
        lines.append(f"{label}: a placement group's ready(): the group is not placed yet "
                     f"({groups or 'no group pending'}); {_resources(fold)}")
        return
    lines.append(f"{label}: pending for {time.time() - task.since:.0f} s, not started: "
                 f"{_resources(fold)}"
                 + (f"; placement group(s) not placed yet: {groups}" if groups else ""))


def _pending_groups(fold: _Fold) -> str:
    """The placement groups not placed yet: id or name, bundles, strategy."""
    try:
        table = fold.cluster.placement_groups() if fold.cluster else {}
    except Exception:
        return ""
    shown = []
    for pg_id, row in table.items():
        if not isinstance(row, dict) or row.get("state") != "PENDING":
            continue
        bundles = row.get("bundles") or {}
        wants = [dict(b) for b in (bundles.values() if isinstance(bundles, dict) else bundles)]
        name = row.get("name") or str(pg_id)[:12]
        shown.append(f"{name} PENDING, bundles {wants} {row.get('strategy', '')}".rstrip())
    return "; ".join(shown)


def _resources(fold: _Fold) -> str:
    try:
        assert fold.cluster is not None
        free, total = fold.cluster.available(), fold.cluster.total()
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

"""The driver's event records, made from what it does and what its node tells it (layer L2).

The per-call builders (`submitted`, `wait_begun`, `started`, `finished`, `created`, `freed`)
take plain ids and are published with `events.publish_later`: ids are formatted and records made
only when read. `from_node` turns a node's EVENT message (tasks that the driver's tasks submitted,
objects freed, workers, actors) into records.

The driver's `runtime.CoreClient` hands what its node (or a direct link) says to the functions
at the end: `task_ended`, `tasks_started`, `output` (which also prints remote output) and
`node_event`. They run on whichever thread reads the connection.
"""

from __future__ import annotations

import itertools
import logging
import sys
import time
from typing import TYPE_CHECKING, Any

from . import events as ev
from . import serialization
from .ids import hex_id

if TYPE_CHECKING:
    from .runtime import CoreClient

log = logging.getLogger(__name__)
_T = time.time


@ev.builds("task_submitted")
def submitted(t: float, task_id: int, name: str, deps: tuple[int, ...], nret: int,
              actor_id: int, tag: str | None, parent: int = 0) -> ev.Event:
    return ev.TaskSubmitted(t, hex_id(task_id), name, tuple(hex_id(d) for d in deps),
                            tuple(hex_id(task_id + 1 + i) for i in range(nret)),
                            hex_id(parent) if parent else None,
                            hex_id(actor_id) if actor_id else None, tag)


@ev.builds("wait_begun")
def wait_begun(t: float, wait_id: int, what: str, oids: tuple[int, ...], num_returns: int,
               ready: int, tag: str | None) -> ev.Event:
    return ev.WaitBegun(t, wait_id, what, tuple(hex_id(o) for o in oids), num_returns, ready,
                        tag)


@ev.builds("task_started")
def started(t: float, task_id: int, name: str, node_id: str, pid: int) -> ev.Event:
    return ev.TaskStarted(t, hex_id(task_id), name, node_id, pid)


@ev.builds("task_finished")
def finished(t: float, task_id: int, name: str, duration: float, node_id: str, pid: int,
             t0: float) -> ev.Event:
    return ev.TaskFinished(t, hex_id(task_id), name, duration, node_id, pid, t0)


@ev.builds("object_created")
def created(t: float, oid: int, size: int, node_id: str, owner: int, task_id: int | None,
            in_shm: bool) -> ev.Event:
    return ev.ObjectCreated(t, hex_id(oid), size, node_id, hex_id(owner),
                            hex_id(task_id) if task_id is not None else None, in_shm)


@ev.builds("object_freed")
def freed(t: float, oid: int) -> ev.Event:
    return ev.ObjectFreed(t, hex_id(oid))


def from_node(kind: str, f: dict[str, Any], now: float, node_id: str, inline_max: int,
              tag: str | None) -> list[tuple[ev.Builder, tuple]]:
    """The records for a node's EVENT message ``(kind, fields)``, as (builder, arguments) for
    `events.publish_later`; ``tag`` is the submitter of the task's root task."""
    if kind == "objects_freed":
        return [(freed, (now, oid)) for oid in f["ids"]]
    if kind == "task_submitted":
        return [(submitted, (now, f["task_id"], f["name"], f["deps"], f["nret"], f["actor"],
                             tag, f["parent"]))]
    if kind == "task_finished":
        tid = f["task_id"]
        # Results of a task another task submitted: that task's process holds them.
        return [(finished, (now, tid, f["name"], f["t1"] - f["t0"], node_id, f["pid"],
                            f["t0"])),
                *((created, (now, oid, size, node_id, tid, tid, size > inline_max))
                  for oid, size in f["sizes"])]
    if kind == "task_failed":
        etype, message = error_summary(f["error"])
        return [(ev.TaskFailed, (now, hex_id(f["task_id"]), f["name"], etype, message,
                                 f["t1"] - f["t0"], f["pid"], f["t0"],
                                 traceback_text(f["error"]), tag))]
    if kind == "task_retried":
        return [(ev.TaskRetried, (now, hex_id(f["task_id"]), f["name"], f["attempt"],
                                  f["reason"]))]
    if kind == "actor_restarted":
        return [(ev.ActorRestarted, (now, hex_id(f["actor_id"]), f["restarts"]))]
    if kind == "actor_died":
        return [(ev.ActorDied, (now, hex_id(f["actor_id"]), f["reason"]))]
    if kind == "worker_up":
        return [(ev.WorkerUp, (now, node_id, f["pid"]))]
    if kind == "worker_down":
        return [(ev.WorkerDown, (now, node_id, f["pid"], f["reason"]))]
    return []


def traceback_text(blob: bytes | None) -> str:
    try:
        return serialization.error_text(blob)[-8000:] if blob else ""
    except Exception:
        return ""


def error_summary(blob: bytes | None) -> tuple[str, str]:
    if not blob:
        return "Error", ""
    try:
        err = serialization.error_from_blob(blob)
    except Exception as exc:
        return type(exc).__name__, str(exc)
    cause = getattr(err, "cause", None)
    if cause is not None:
        return type(cause).__name__, str(cause)
    return type(err).__name__, str(err).splitlines()[0] if str(err) else ""


# ---------------------------------------------------------------- what the driver is told


def task_ended(client: CoreClient, task_id: int, name: str, tag: str | None, ok: bool,
               locs: list, t0: float, t1: float, pid: int) -> None:
    """Records for a DONE: started (if its notice never came), finished or failed, and the
    objects it made."""
    now = _T()
    node_id = client.node_id
    if task_id in client.running_tasks:
        client.running_tasks.discard(task_id)
    elif t0:
        # It ended before the node's batched started-notice went out.
        ev.publish_later(started, (t0, task_id, name, node_id, pid))
    if ok:
        ev.publish_later(finished, (now, task_id, name, t1 - t0, node_id, pid, t0))
        for loc in locs:
            size = len(loc[1]) if loc[1] is not None else loc[2]
            ev.publish_later(created, (now, loc[0], size, node_id, client.client_no, task_id,
                                       loc[1] is None))
    else:
        blob = locs[0][1] if locs else None
        etype, message = error_summary(blob)
        client.publish(ev.TaskFailed(now, hex_id(task_id), name, etype, message,
                                     t1 - t0 if t0 else 0.0, pid, t0, traceback_text(blob),
                                     tag))


def tasks_started(client: CoreClient, items: list[tuple[int, int]], t: float) -> None:
    """A STARTED notice: ``items`` are (task id, worker pid)."""
    names = client.task_names
    client.running_tasks.update(task_id for task_id, _ in items)
    for task_id, pid in items:
        ev.publish_later(started, (t, task_id, names.get(task_id, "?"), client.node_id, pid))


def output(client: CoreClient, msg: tuple) -> None:
    """A LOG message: its lines as records, shown (see `show_output`)."""
    _, task_id, name, pid, stream, text = msg
    now = _T()
    tag = client.task_tags.get(task_id)
    show_output([ev.Output(now, hex_id(task_id), name, pid, stream, line, tag)
                 for line in text.splitlines()], client.log_to_driver)


def show_output(lines: list[ev.Output], log_to_driver: bool) -> None:
    """Remote output lines on the driver: published, then handed to the output handler (a
    notebook routes them to their cell) or, unless it took them, printed with the task's name
    and pid in front."""
    for line in lines:
        ev.publish(line)
    handler = ev.output_handler()
    if handler is not None:
        try:
            if handler(lines):
                return
        except Exception:
            log.exception("nbdist output handler failed")
    if log_to_driver:
        # A run of lines of one stream at a time, in order.
        for stream, run in itertools.groupby(lines, key=lambda e: e.stream):
            out = sys.stderr if stream == "stderr" else sys.stdout
            try:
                out.write("".join(f"({e.name} pid={e.worker_pid}) {e.line}\n" for e in run))
                out.flush()
            except Exception:  # a closed stream must not break the thread that reads
                pass


def node_event(client: CoreClient, kind: str, f: dict[str, Any]) -> None:
    """An EVENT message: keeps the driver's task names and tags for nested tasks current."""
    tag = None
    if kind == "task_submitted":
        tid = f["task_id"]
        client.task_names.setdefault(tid, f["name"])
        tag = client.task_tags.get(f["parent"])
        if tag is not None:
            client.task_tags[tid] = tag
    elif kind in ("task_finished", "task_failed"):
        client.task_names.pop(f["task_id"], None)
        client.task_tags.pop(f["task_id"], None)
    for make, args in from_node(kind, f, _T(), client.node_id, client.inline_max, tag):
        ev.publish_later(make, args)

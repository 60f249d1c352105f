"""The driver's event records, made from what it does and what its node tells it (layer L2).

Records of the hot paths are published compact (`events.publish_later`: the record's fields,
ids as ints), so ids are formatted and records made only when read. A node's EVENT message
carries records already in that form (tasks that the driver's tasks submitted, objects freed,
spilled or restored, workers, actors): `node_events` publishes them as they are, filling in
only what the node cannot know (the submitter tag of a nested task's root task).

The driver's `runtime.CoreClient` hands what its node (or a direct link) says to the functions
here: `task_ended`, `tasks_started`, `output` (which also prints remote output) and
`node_events`. They run on whichever thread reads the connection.
"""

from __future__ import annotations

import itertools
import logging
import sys
import time
from typing import TYPE_CHECKING

from nbdist import events as ev
from nbdist.driver import debug
from nbdist.ids import hex_id
from nbdist.wire.serialization import error_fields

if TYPE_CHECKING:
    from nbdist.driver.runtime import CoreClient

log = logging.getLogger(__name__)
_T = time.time
# Where a record's submitter tag goes, for the kinds a node sends that carry one.
_SUBMITTER = {ev.TaskSubmitted: 7, ev.TaskFailed: 9}


# ---------------------------------------------------------------- what the driver is told


def task_ended(client: CoreClient, task_id: int, name: str, tag: str | None, ok: bool,
               locs: list, t0: float, t1: float, pid: int, where: str = "") -> None:
    """Records for a DONE: started (if its notice never came), finished or failed, and the
    objects it made (``where``: the node it ran on, when not the driver's)."""
    now = _T()
    node_id = where or client.node_id
    if task_id in client.running_tasks:
        client.running_tasks.discard(task_id)
    elif t0:
        # It ended before the node's batched started-notice went out.
        ev.publish_later(ev.TaskStarted, (t0, task_id, name, node_id, pid))
    if ok:
        ev.publish_later(ev.TaskFinished, (now, task_id, name, t1 - t0, node_id, pid, t0))
        for loc in locs:
            size = len(loc[1]) if loc[1] is not None else loc[2]
            ev.publish_later(ev.ObjectCreated, (now, loc[0], size, node_id, client.client_no,
                                                task_id, loc[1] is None))
    else:
        etype, message, text = error_fields(locs[0][1] if locs else None)
        ev.publish_later(ev.TaskFailed, (now, task_id, name, etype, message,
                                         t1 - t0 if t0 else 0.0, pid, t0, text, tag))


def tasks_started(client: CoreClient, items: list[tuple], t: float) -> None:
    """A STARTED notice: ``items`` are (task id, worker pid[, the node it runs on, when not
    the driver's])."""
    names = client.task_names
    here = client.node_id
    for task_id, pid, *where in items:
        client.running_tasks.add(task_id)
        ev.publish_later(ev.TaskStarted, (t, task_id, names.get(task_id, "?"),
                                          where[0] if where else here, pid))


def output(client: CoreClient, msg: tuple) -> None:
    """A LOG message: its lines as records, shown (see `show_output`)."""
    _, task_id, name, pid, stream, text = msg
    if stream == debug.DEBUG_STREAM:  # a task paused in the debugger, or going on
        debug.notice(client, task_id, name, pid, text, show_output)
        return
    now = _T()
    tag = client.task_tags.get(task_id)
    show_output([ev.Output(now, hex_id(task_id), name, pid, stream, line, tag)
                 for line in text.splitlines()], client.log_to_driver)


def show_output(lines: list[ev.Output], log_to_driver: bool) -> None:
    """Remote output lines on the driver: published, less those an output filter takes
    (`events.add_output_filter`), then handed to the output handler (a
    notebook routes them to their cell) or, unless it took them, printed with the task's name
    and pid in front."""
    for line in lines:
        ev.publish(line)
    lines = ev.filter_output(lines)
    if not lines:
        return
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


def node_events(client: CoreClient, items: list[ev.Compact]) -> None:
    """An EVENT message: records in compact form, published as they are. Keeps the driver's
    task names and tags for nested tasks current, and gives a nested task's records the tag
    of its root task."""
    names, tags = client.task_names, client.task_tags
    for code, values in items:
        cls = ev.RECORDS[code]
        if cls is ev.TaskSubmitted:
            tid = values[1]
            names.setdefault(tid, values[2])
            tag = tags.get(values[5])
            if tag is not None:
                tags[tid] = tag
        elif cls is ev.TaskFinished or cls is ev.TaskFailed:
            names.pop(values[1], None)
            tag = tags.pop(values[1], None)
        else:
            tag = None
        where = _SUBMITTER.get(cls)
        if tag is not None and where is not None and len(values) > where:
            values = (*values[:where], tag, *values[where + 1:])
        ev.publish_later(cls, values)

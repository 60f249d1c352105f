"""What the node daemon does with a message it cannot handle (layer L2).

Messages from drivers and workers carry what user code made: ids of refs it built, values it
pickled, names it chose. A message that makes a handler raise (malformed, or naming something
that cannot exist) must cost its sender, never the node: every other process of the node is
served on. The sender's request fails with an error that says what happened:

    CONTROL        the request alone fails (CONTROL_REPLY not ok, with the reason); the
                   connection stays, since a query changes no state
    anything else  the handler may have changed state half-way, so the sender is disconnected
                   (the node's usual cleanup of a departed process runs); a worker's running
                   task fails first with `ValueError` carrying the reason, not retried, since
                   running it again would send the same message
    head, nodes    daemons, not user code: the message is logged and skipped
"""

from __future__ import annotations

import logging
from typing import Any

from nbdist.scheduler import Client
from nbdist.wire import protocol as P
from nbdist.wire.serialization import system_error_blob

log = logging.getLogger(__name__)


def describe(msg: Any, exc: BaseException) -> str:
    op = msg[0] if isinstance(msg, tuple) and msg else msg
    return (f"the node could not handle message {op!r} from this process "
            f"({type(exc).__name__}: {exc})")


def refuse(node: Any, client: Client, msg: Any, exc: Exception) -> bool:
    """Fail ``client``'s request for ``msg``; True if its connection stays open."""
    reason = describe(msg, exc)
    log.error("nbdist node: %s (pid %s)", reason, client.pid, exc_info=exc)
    if isinstance(msg, tuple) and len(msg) > 1 and msg[0] == P.CONTROL:
        node.server.send(client.peer, (P.CONTROL_REPLY, msg[1], False, reason))
        return True
    worker = client.worker
    task = worker.task if worker is not None else None
    if task is not None and not task.finished:
        try:
            node.state.result(worker, task.spec[P.S_TASK_ID], False, [],
                              system_error_blob(ValueError(reason)), 0.0, 0.0)
        except Exception:
            log.exception("nbdist node: could not fail the task of pid %s", client.pid)
    node.server.drop(client.peer, reason)
    return False


def skip(source: str, msg: Any, exc: Exception) -> None:
    """A daemon's message that failed: logged, and the node serves on."""
    log.error("nbdist node: %s from %s", describe(msg, exc), source, exc_info=exc)

"""Direct actor calls: a driver's calls to an actor on its own node, sent straight to the
actor's worker over a link of their own (layer L2).

Through the node, a call crosses four processes (driver → node → worker → node → driver); over
a link, two. While all goes well the node does not hear of a direct call at all.

Routing, per actor, keeps each driver's calls in submission order:

    through the node   until one of the actor's calls has ended there (its DONE names the
                       worker that runs the actor) and none is left in flight there; then the
                       driver opens a link to that worker (`links.connect`)
    over the link      every later call; an argument that is not ready yet is fetched from the
                       node by the worker, which still runs the calls in arrival order
    through the node   again when the link breaks (the worker died, or was killed): the calls
                       in flight on it go to the node first, in order, marked as possibly run
                       (``extra = {"lost_on": pid, "attempt": 1}``), so the node fails or
                       retries them like any call in flight when an actor dies
                       (``max_task_retries``); a new link once those have ended

Results come back on the link (DONE, laid out as the node's) when they are inline and hold no
refs. Otherwise the node must hold them: the worker stores them there for this driver
(``DIRECT_RESULT``) and the node sends the DONE. An inline result is *unregistered*: the node
does not know it until it *escapes* (it is pickled into something, or named as an argument of
work the node handles); then the driver registers it with a PUT, queued in order with its ref
messages. A result dropped before it escapes costs the node nothing.

While a call is in flight the driver holds its arguments (top-level and nested refs) and the
actor, as the node holds them for the calls it runs. A worker's output for a direct call comes
on the link, ahead of its DONE.

State, under ``lock`` (re-entrant: a ref's ``__del__`` may run while it is held):

``worker_pid`` actor id -> pid of the worker that last ended one of its calls
``no_link``    actor id -> that pid, when no link could be opened to it (try the next pid)
``links``      actor id -> open `links.Link`
``via_node``   actor id -> its calls from this driver in flight through the node
``node_calls`` task id -> actor id, for those
``calls``      task id -> `_Call` in flight on a link; ``returns``: their return ids
``escaped``    return ids of calls in flight that escaped: registered as they arrive
``unregistered`` inline results this process holds and the node does not know
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from nbdist import events as ev
from nbdist.driver import records
from nbdist.exceptions import NbdistError
from nbdist.wire import links
from nbdist.wire import protocol as P
from nbdist.wire.frames import TransportError

if TYPE_CHECKING:
    from nbdist.driver.runtime import CoreClient

log = logging.getLogger(__name__)


class _Call:
    __slots__ = ("spec", "link", "holds", "cancel")

    def __init__(self, spec: tuple, link: links.Link, holds: tuple[int, ...]) -> None:
        self.spec = spec
        self.link = link
        self.holds = holds
        self.cancel: bool | None = None  # force flag, once cancel() was asked


class DirectCalls:
    """A driver's direct calls (see the module docstring)."""

    def __init__(self, client: CoreClient, sock_dir: str, secret: bytes) -> None:
        self.client = client
        self.sock_dir = sock_dir
        self.secret = secret
        self.lock = threading.RLock()
        self.worker_pid: dict[int, int] = {}
        self.no_link: dict[int, int] = {}
        self.links: dict[int, links.Link] = {}
        self.via_node: dict[int, int] = {}
        self.node_calls: dict[int, int] = {}
        self.calls: dict[int, _Call] = {}
        self.returns: dict[int, int] = {}
        self.escaped: set[int] = set()
        self.unregistered: set[int] = set()
        self._actor_of: dict[links.Link, int] = {}
        self.sent = 0  # calls sent over links (for tests and benchmarks)
        # Step-through mode: the node holds calls, so every call goes through it meanwhile.
        self.stepping = False

    # ------------------------------------------------------------ submitting
    def route(self, spec: tuple, contained: tuple[int, ...]) -> bool:
        """Send the actor call ``spec`` over a link if its actor is reachable directly (True);
        else count it as in flight through the node, where the caller sends it (False)."""
        actor_id = spec[P.S_ACTOR]
        with self.lock:
            link = None
            if not self.via_node.get(actor_id) and not self.stepping:
                link = self.links.get(actor_id) or self._open(actor_id)
            if link is None:
                self.via_node[actor_id] = self.via_node.get(actor_id, 0) + 1
                self.node_calls[spec[P.S_TASK_ID]] = actor_id
                return False
            msg = self._register(link, spec, contained)
            # Taken before ``lock`` is let go, so calls leave in the order they were routed;
            # sent after, so a full socket (the worker busy) never holds up the thread that
            # reads the answers, which needs ``lock``.
            link.send_lock.acquire()
        try:
            # What the worker may ask the node for (escaped results, refs in the arguments) is
            # sent to the node before the call goes to the worker. The node may still read the
            # worker's request first (another connection): the worker asks for them as coming
            # (`CoreClient.fetch`), and the node waits for them.
            self.client.flush_ref_ops()
            link.send_held([msg])
        except OSError:
            link.close()  # its calls, this one included, go to the node (`_lost`)
        finally:
            link.send_lock.release()
        return True

    def _open(self, actor_id: int) -> links.Link | None:
        pid = self.worker_pid.get(actor_id)
        if not pid or self.no_link.get(actor_id) == pid:
            return None
        try:
            sock = links.connect(self.sock_dir, pid, actor_id, self.secret)
        except (OSError, TransportError) as exc:
            log.debug("nbdist: no direct link to actor %x (pid %d): %s", actor_id, pid, exc)
            self.no_link[actor_id] = pid
            return None
        link = links.Link(sock, self._on_link, self._lost, pid)
        self.links[actor_id] = link
        self._actor_of[link] = actor_id
        self.client.conn.add_extra(link)
        return link

    def _register(self, link: links.Link, spec: tuple, contained: tuple[int, ...]) -> tuple:
        """Note the call as in flight on ``link`` and hold what it needs; its CALL message."""
        client = self.client
        task_id = spec[P.S_TASK_ID]
        deps = spec[P.S_DEPS]
        dep_locs = []
        for dep in deps:
            loc = client.cached(dep)
            if loc is None:
                self.escape(dep)  # the worker fetches it from the node
            dep_locs.append(loc)
        holds = (*deps, *contained, spec[P.S_ACTOR])
        for oid in holds:
            client.hold(oid)
        self.calls[task_id] = _Call(spec, link, holds)
        for rid in range(task_id + 1, task_id + 1 + spec[P.S_NRET]):
            self.returns[rid] = task_id
        self.sent += 1
        return (P.CALL, spec, dep_locs)

    # ------------------------------------------------------------ objects
    def escape(self, oid: int) -> None:
        """``oid`` is about to be named to the node or to another process: make sure the node
        knows it (an unregistered result is registered now; one still on its way, on
        arrival)."""
        with self.lock:
            if oid in self.unregistered:
                self.unregistered.discard(oid)
                loc = self.client.cached(oid)
                if loc is not None:
                    self.client.queue_ref_op((P.PUT, oid, loc[1], 0, ()))
            elif oid in self.returns and oid not in self.escaped:
                # Still on its way: the node keeps a place for it (this process holds it),
                # and takes the value when it arrives (`ended`).
                self.escaped.add(oid)
                self.client.queue_ref_op((1, oid))

    def forget(self, oid: int) -> bool:
        """This process dropped its last ref to ``oid``: True if the node does not know of
        that hold (nothing to tell it; a result still on its way is settled on arrival)."""
        with self.lock:
            if oid in self.unregistered:
                self.unregistered.discard(oid)
                # The node, which would report it freed, never knew it.
                ev.publish_later(ev.ObjectFreed, (time.time(), oid, 0, ""))
                return True
            return oid in self.returns

    # ------------------------------------------------------------ results
    def _on_link(self, msgs: list[Any]) -> None:
        client = self.client
        for msg in msgs:
            if msg[0] == P.DONE:
                client.task_done(msg, from_link=True)
            elif msg[0] == P.LOG:
                records.output(client, msg)

    def ended(self, msg: tuple, from_link: bool) -> None:
        """A DONE arrived for ``msg[1]`` (through the node, or on a link: ``from_link``)."""
        task_id, locs, pid = msg[1], msg[3], msg[6]
        if task_id not in self.node_calls and task_id not in self.calls:
            return  # a task, not an actor call of ours (registered before it was sent)
        client = self.client
        with self.lock:
            actor_id = self.node_calls.pop(task_id, None)
            if actor_id is not None:
                left = self.via_node.get(actor_id, 1) - 1
                if left > 0:
                    self.via_node[actor_id] = left
                else:
                    self.via_node.pop(actor_id, None)
                if pid:
                    self.worker_pid[actor_id] = pid
                return
            call = self.calls.pop(task_id, None)
            if call is None:
                return
            escaped = set()
            for rid in range(task_id + 1, task_id + 1 + call.spec[P.S_NRET]):
                self.returns.pop(rid, None)
                if rid in self.escaped:
                    self.escaped.discard(rid)
                    escaped.add(rid)
            queue = client.queue_ref_op
            for loc in locs:
                oid = loc[0]
                held = client.holds(oid)
                if not from_link:
                    # The worker stored it at the node for us: tell the node if we let go.
                    if not held:
                        queue((-1, oid))
                elif oid in escaped:  # the node holds its place for us since `escape`
                    queue((P.PUT, oid, loc[1], 0, ()))
                    if not held:
                        queue((-1, oid))
                    # A later call's worker (or a task) is likely waiting for it at the node.
                    client.flush_ref_ops_soon()
                elif held:
                    self.unregistered.add(oid)
                else:  # dropped before it came: gone at once, and only this process knew
                    ev.publish_later(ev.ObjectFreed, (time.time(), oid, 0, ""))
            for oid in call.holds:
                client.release(oid)

    # ------------------------------------------------------------ cancel
    def cancel(self, task_id: int, force: bool, recursive: bool = False) -> bool:
        """Ask the worker to cancel the direct call ``task_id`` (False: not one in flight);
        ``recursive``: the tasks the call submitted too (the worker's node cancels them)."""
        with self.lock:
            call = self.calls.get(task_id)
            if call is None:
                return False
            call.cancel = force
            link = call.link
        try:
            link.send([(P.CALL_CANCEL, task_id, recursive)])
        except OSError:
            pass  # the link is gone: the call went to the node, with its cancel (`_lost`)
        return True

    def task_of(self, oid: int) -> int:
        """The task id of the direct call in flight that returns ``oid`` (0: none)."""
        return self.returns.get(oid, 0)

    # ------------------------------------------------------------ broken links
    def _lost(self, link: links.Link) -> None:
        """``link`` closed: its calls in flight go to the node, in order (module docstring)."""
        client = self.client
        client.conn.remove_extra(link)
        with self.lock:
            actor_id = self._actor_of.pop(link, 0)
            if self.links.get(actor_id) is link:
                del self.links[actor_id]
            lost = sorted((tid, c) for tid, c in self.calls.items() if c.link is link)
            if not lost:
                return
            msgs: list[Any] = []
            after: list[Any] = []
            for task_id, call in lost:
                del self.calls[task_id]
                spec = call.spec
                extra = {"lost_on": link.peer_pid, "attempt": 1}
                spec = (*spec[:P.S_EXTRA], extra, *spec[P.S_EXTRA + 1:])
                self.via_node[actor_id] = self.via_node.get(actor_id, 0) + 1
                self.node_calls[task_id] = actor_id
                for dep in spec[P.S_DEPS]:
                    self.escape(dep)  # named to the node now
                msgs.append((P.SUBMIT, spec))
                for rid in range(task_id + 1, task_id + 1 + spec[P.S_NRET]):
                    self.returns.pop(rid, None)
                    self.escaped.discard(rid)
                    if not client.holds(rid):
                        after.append(rid)  # the node holds it for us from the SUBMIT on
                if call.cancel is not None:
                    msgs.append((P.CANCEL, task_id + 1, call.cancel))
            if client.closed:
                return
            try:
                client.send(msgs)
            except NbdistError:
                return  # the node is gone too: every waiter learns that from the client
            for rid in after:
                client.queue_ref_op((-1, rid))
            for _, call in lost:
                for oid in call.holds:
                    client.release(oid)

    def close(self) -> None:
        with self.lock:
            open_links = list(self.links.values())
        for link in open_links:
            link.close()

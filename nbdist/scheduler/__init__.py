"""The node's scheduler and object directory: a state machine with no I/O (layer L1).

``NodeState`` is driven by the node daemon's loop: every incoming message becomes a method
call (`submit`, `result`, `refs`, `get_request`, `worker_lost`, `remote_result`, `node_lost`
...). Everything it wants done goes out through the ``NodeIO`` interface it was given:
``send(client, msg)``, ``spawn_worker()``, ``kill_worker(worker)``, ``unlink(oid)``,
``spill(oid, size)``, ``forward(index, spec, locs)``, ``to_node(index, msg)``,
``to_head(op, args)``. Tests drive it with a recording NodeIO and no sockets. Everything runs
on the node daemon's single thread.

Collaborators (one module each; each owns its state and invariants; none imports the node
state: what one needs of another is passed in when the node state builds them, and the few
calls back up are callbacks)::

    NodeState (node_state)   messages in; a task's path, dispatch, losses; builds the rest
     ├─ ActorTable (actors)  ── uses TaskTable, Placement, Notices
     ├─ WorkerPool (workers)
     ├─ Placement (placement)
     ├─ TaskTable (tasks)    ── uses ObjectTable, Notices
     ├─ ObjectTable (objects) ── uses Notices; calls back deps_ready, producer, actor_ref
     ├─ Stepper (stepping)   ── uses Notices; calls back to release a task
     └─ Notices (notices)
    all of them: records (Client, Worker, Task, Obj, Actor, NodeIO), states

``objects``    ObjectTable: id -> Obj, PENDING until its task ends, then READY (value inline or
               in a shm file) or failed (an error blob). ``count`` is the number of reasons to
               keep it: each client process holding a ref (``Client.holds``), each unfinished
               task using it as an argument or carrying it inside its arguments, each stored
               object containing it. At zero, a stored object is freed (its shm file unlinked).
               Also shared-memory accounting and the spill policy (least recently needed to
               disk when full, restored on demand), and objects fetched from or borrowed by
               other nodes.
``tasks``      TaskTable: id -> Task, every task not yet ended (waiting for arguments, queued,
               running here, forwarded); how a task ends (DONE to its owner, results stored,
               arguments unpinned) and whether one that raised runs again.
``placement``  Placement: the resources, the queues of ready work (``ready``: resource shape ->
               FIFO of plain tasks; ``pending_actors``), the other nodes' resources, forwarding
               to them ("spillback", not object spilling), tasks parked until a node can run
               them.
``workers``    WorkerPool: the worker processes: idle, busy with one task, blocked in `get`
               (its CPU lent back), or dedicated to an actor.
``actors``     ActorTable: id -> Actor: its worker or its node, a FIFO of calls (dispatched
               strictly in submission order as their arguments become ready), the calls in
               flight, restarts left; stand-ins routing calls to another node's actor.
``bundles``    Bundles: this node's share of placement groups: bundles prepared (held for the
               head's two-phase placement), committed (their ``<R>_group_<pg>`` resources in
               ``Placement.total``), recently removed groups and why.
``notices``    Notices: events for the drivers and batched started / freed notices.
``stepping``   Stepper: step-through mode, the ready tasks of drivers that asked for it, held
               until a step releases them (`NodeState._deps_ready` asks it, one set test).
``states``     the worker and actor states and the only moves allowed between them, checked
               on every change (`IllegalTransition`).
``records``    the records above and the NodeIO interface.

Invariants: a task holds its resources from dispatch to its result, except CPU while its worker
is blocked in `get`; a plain task is on exactly one of: a dependency's waiting list, a ready
queue, a worker, another node. A failed dependency fails its dependents without running them.

Hot path: a task costs a fixed handful of dict operations (its record, its return objects,
its arguments' counts) and no per-task event objects; collaborators are reached through
attributes set once, and the node state reads the object and task dicts directly.
"""

from nbdist.scheduler.node_state import NodeState
from nbdist.scheduler.records import Actor, Client, NodeIO, Obj, Task, Worker
from nbdist.scheduler.states import ActorState, IllegalTransition, WorkerState

__all__ = ["NodeState", "NodeIO", "Client", "Worker", "Task", "Obj", "Actor", "WorkerState",
           "ActorState", "IllegalTransition"]

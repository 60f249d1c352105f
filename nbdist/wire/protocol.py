"""Messages between nbdist processes (layer L0).

Every connection starts with a mutual HMAC challenge (see ``transport``); only after it do frames
flow. A frame is a 4-byte big-endian length and a pickled *list* of messages, so a sender can
batch whatever it has queued into one write. A message is a tuple whose first item is an opcode
below. Plain tuples, not classes, because they are built and pickled on every task's hot path;
the layout of each is written next to its opcode and `PROTOCOL_VERSION` changes with any layout.

Task spec (``SUBMIT``, ``EXEC``), a tuple indexed by the ``S_*`` constants:
    task_id, fid (function or class id; 0 for actor methods), name, args (pickled blob or b""),
    deps (ids of top-level ref arguments), num_returns, resources (tuple of (name, amount), or
    None for one CPU), max_retries, retry_exceptions (bool or a pickled tuple of types), actor_id
    (0 = a plain task), method, parent_task (0 = submitted by the driver), contained (ids of refs
    nested inside the arguments), job (client number of the driver the work belongs to), extra
    (dict of actor options for actor creation, else None).

An object's location, ``Loc``: ``(oid, blob_or_None, shm_size[, contained[, offset]])``: the
value inline when blob is bytes; else shm_size bytes in shared memory: in the node's arena at
``offset`` when there is one (``arena_name``; see `loc_offset`), else a file named
``shm_name(node_pid, oid)``. ``contained`` (ids of refs inside the value) travels with results.
A location in the arena that the node sends a process is a *lease* on that range, which the
process gives back with ``UNPIN`` (see `nbdist.objects.store`).
"""

from __future__ import annotations

PROTOCOL_VERSION = 5

# -- handshake (after authentication) --
HELLO = 1  # (HELLO, version, kind, pid, info: dict)                     client -> server
WELCOME = 2  # (WELCOME, version, client_no, info: dict)                  server -> client

# -- client (driver or worker) -> node --
SUBMIT = 10  # (SUBMIT, spec)
REGISTER_FN = 11  # (REGISTER_FN, fid, pickled)
PUT = 12  # (PUT, oid, blob_or_None, shm_size, contained[, offset])  offset: in the arena
REFS = 13  # (REFS, ops: list of (+1|-1, id))  ordered adds/removes of this process's holds
GET_REQ = 14  # (GET_REQ, oids[, coming])  push me these objects when they are ready
BLOCKED = 15  # (BLOCKED, task_id)   the worker waits in get: give its CPU back
UNBLOCKED = 16  # (UNBLOCKED, task_id)
CANCEL = 17  # (CANCEL, task_id, force[, recursive: the tasks it submitted too; default])
KILL_ACTOR = 18  # (KILL_ACTOR, actor_id, no_restart[, why: the reason later calls are told])
CONTROL = 19  # (CONTROL, req_id, op, args)   cluster queries; relayed to the head as needed
# ("reserve" (oid, size, arena_ok) answers the arena offset granted, or -1: write a file.)
UNPIN = 20  # (UNPIN, offsets)  one lease on each of these arena ranges given back
# Tell me when these objects exist anywhere in the cluster, without copying them here (Ray's
# ``wait(fetch_local=False)``); also node -> the objects' owner node. Answered by PRESENT.
LOCATE = 21  # (LOCATE, oids)

# -- worker -> node --
RESULT = 30  # (RESULT, task_id, ok, locs, error_blob, t_start, t_end)
STDOUT = 31  # (STDOUT, task_id, stream, text[, name: the actor's own repr])
ACTOR_READY = 32  # (ACTOR_READY, actor_id, ok, error_blob)
# A direct call's results that the node must hold (in shared memory, or containing refs):
# stored for the calling driver ``job``, which then gets DONE from the node, not the link.
DIRECT_RESULT = 33  # (DIRECT_RESULT, task_id, job, locs, t_start, t_end)
# Run records (events.RunUpdate, compact) that a task or actor published in this worker, for
# the driver of ``job``: batched, a member's updates coalesced; sent only when there are some.
RUNS = 34  # (RUNS, job, records: [(code, fields)])

# -- node -> client --
OBJ = 40  # (OBJ, loc)                                   a value or location pushed
DONE = 41  # (DONE, task_id, ok, locs, t_start, t_end, worker_pid[, node_id]) owner: its task
#            ended (node_id: the node it ran on, when another node ran it)
STARTED = 42  # (STARTED, [(task_id, worker_pid[, node_id])], t)  owner: its tasks began
EVENT = 43  # (EVENT, records: [(code, fields)])     the job's driver: events.RECORDS, compact
CONTROL_REPLY = 44  # (CONTROL_REPLY, req_id, ok, result)
LOG = 45  # (LOG, task_id, name, pid, stream, text)       the job's driver: remote output
PRESENT = 46  # (PRESENT, oids)  these exist in the cluster (answers LOCATE; node -> node too)

# -- node -> worker --
EXEC = 50  # (EXEC, spec, dep_locs, gpu_ids)
FN = 51  # (FN, fid, pickled)
INTERRUPT = 52  # (INTERRUPT, task_id)  raise KeyboardInterrupt in the running task
EXIT = 53  # (EXIT,)

# -- node <-> head --
NODE_REGISTER = 60  # (NODE_REGISTER, info)  info: node_id, address, pid, resources
NODE_UPDATE = 61  # (NODE_UPDATE, available)
HEAD_REQUEST = 62  # (HEAD_REQUEST, token, op, args)   relayed CONTROL
HEAD_REPLY = 63  # (HEAD_REPLY, token, ok, result)
CLUSTER_VIEW = 64  # (CLUSTER_VIEW, {node_index: {address, total, available, alive}})  head -> node
# head -> node: placement-group bundles (nbdist/daemons/groups.py); the node answers a prepare
# with the head request "group_prepared" (pg, attempt, node_index, ok)
GROUP = 65  # (GROUP, "prepare", pg, attempt, bundles, commit) | (GROUP, "commit"|"cancel", pg,
#             attempt) | (GROUP, "remove", pg, reason)

# -- node <-> node (each node sends on its own connection to the other) --
# A value travelling between nodes, ``Val``: (oid, blob_or_None, data_or_None, contained): inline
# blob, or the bytes of the sender's shared-memory file (the receiver writes its own copy).
FORWARD = 70  # (FORWARD, spec, fn_blob_or_None, dep_vals)   run this task for me
RESULTS = 71  # (RESULTS, task_id, ok, vals, t_start, t_end, worker_pid)  a forwarded task ended
FETCH = 72  # (FETCH, oids)       send me these objects (you own them) when they are ready
VALUE = 73  # (VALUE, val)        a fetched object
RELAY = 74  # (RELAY, job, msg)   deliver msg (LOG, EVENT) to the job's driver on your node
NODE_REFS = 75  # (NODE_REFS, ops)  the sender's holds on objects the receiver owns
NODE_STARTED = 76  # (NODE_STARTED, [(task_id, worker_pid)], t)  forwarded tasks began
ACTOR_EVENT = 77  # (ACTOR_EVENT, actor_id, what, reason)  an actor hosted for the receiver
#   restarted in its process ("restarted") or is gone ("dead")

# -- driver <-> actor worker on the same node, over a direct link (see `links`, `direct`) --
LINK_HELLO = 80  # (LINK_HELLO, actor_id)        caller -> worker, after the handshake
LINK_WELCOME = 81  # (LINK_WELCOME, ok, pid)      worker -> caller
CALL = 82  # (CALL, spec, dep_locs)    dep_locs[i]: the Loc of deps[i], or None: fetch it
CALL_CANCEL = 83  # (CALL_CANCEL, task_id)
# The worker answers with DONE and LOG, laid out as the node's. A call resubmitted to the node
# after its link broke carries ``extra = {"lost_on": pid, "attempt": n}``: it may have run.

# Every id carries the index of the node whose process made it (its owner) in these bits.
OWNER_SHIFT = 60

# Client kinds in HELLO.
KIND_DRIVER = "driver"
KIND_WORKER = "worker"
KIND_NODE = "node"

# Spec field indexes.
S_TASK_ID = 0
S_FID = 1
S_NAME = 2
S_ARGS = 3
# S_ARGS is the pickled (args, kwargs) with top-level refs as placeholders, b"" for no
# arguments, or this marker when the arguments are exactly the deps, in order.
ARGS_ALL_DEPS = b"D"
S_DEPS = 4
S_NRET = 5
S_RESOURCES = 6
S_MAX_RETRIES = 7
S_RETRY_EXC = 8
S_ACTOR = 9
S_METHOD = 10
S_PARENT = 11
S_CONTAINED = 12
S_JOB = 13
S_EXTRA = 14

# Actor method name used for actor creation specs.
ACTOR_INIT = "__init__"


def shm_name(node_pid: int, oid: int) -> str:
    """File name (under the shm dir) of a shared-memory object; the pid lets a sweep find
    files whose node daemon is gone."""
    return f"nbdist-{node_pid}-{oid:x}"


def arena_name(node_pid: int) -> str:
    """File name (under the shm dir) of a node's arena: swept and removed with its objects."""
    return f"nbdist-{node_pid}-arena"


def loc_offset(loc: tuple) -> int:
    """Where a Loc's value is in the node's arena, or -1 (inline, or a file)."""
    return loc[4] if len(loc) > 4 else -1


def warm_name(node_pid: int, pid: int) -> str:
    """Name prefix of the warm files of writer process ``pid`` (see `store.write`): named
    after the node too, so they go with the node's other files."""
    return f"nbdist-{node_pid}-warm{pid}"


# Work pinned to a node asks for a sliver of that node's ``node:<id>`` resource: NODE_PIN
# (node affinity) fails when the node is not in the cluster; SOFT_NODE_PIN (soft affinity,
# SPREAD) is dropped then, and the work goes where it fits.
NODE_PIN = 1e-4
SOFT_NODE_PIN = 1e-5

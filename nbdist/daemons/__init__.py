"""The long-lived processes of a cluster (layer L2), each run as ``python -m``.

    head.py     the head: node table, named actors, key-value store (never on a task's path)
    groups.py   the head's placement groups: their table and two-phase placement on nodes
    node.py     the node daemon: one per machine; its sockets, workers and files, around the
                scheduler of `nbdist.scheduler`
    node_files.py      the node's shared memory and spill files, values to and from nodes
    node_peers.py      the node's links to the other nodes of its cluster
    node_guard.py      what the node does with a message it cannot handle (its sender fails)
    memory_monitor.py  memory protection: when the node kills which task's worker
    worker.py   a worker process: runs tasks, or hosts one actor

Other processes find the daemons by their command lines (``nbdist.daemons.head``,
``nbdist.daemons.node``): `nbdist.cluster.standalone` matches on those names.
"""

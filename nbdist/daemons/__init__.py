"""The long-lived processes of a cluster (layer L2), each run as ``python -m``.

    head.py     the head: node table, named actors, key-value store (never on a task's path)
    node.py     the node daemon: one per machine; its sockets, workers and files, around the
                scheduler of `nbdist.scheduler`
    worker.py   a worker process: runs tasks, or hosts one actor
    poller.py   fd readiness for the node's and the head's single-threaded loop

Other processes find the daemons by their command lines (``nbdist.daemons.head``,
``nbdist.daemons.node``): `nbdist.cluster.standalone` matches on those names.
"""

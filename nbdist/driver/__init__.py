"""The driver side of the public API (layers L2-L3): what ``import nbdist`` runs in the
user's process, and in every worker that submits work.

    api.py               Ray's core names: init, get, put, wait, remote, kill, ...
    remote_function.py   remote functions and the options shared by tasks and actors
    options.py           Ray's options accepted without effect here, and their checks
    runtime_env.py       runtime environments: packaged by the submitter, applied by workers
    strategies.py        scheduling strategies as the resources work asks for
    groups.py            placement groups (nbdist.util.placement_group's API)
    actor.py             actor classes, handles and methods
    runtime.py           the core client: a process's connection to its node
    direct.py            direct actor calls on one node, around the node daemon
    records.py           the driver's event records, from what it does and what its node says
    context.py           ``get_runtime_context()``, whatever the backend
"""

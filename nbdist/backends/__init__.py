"""Backends: what runs the public API (layers L2-L3).

    base.py     the `Backend` protocol and `current`, the backend of this process
    local.py    nbdist's own engine (the node daemons of `nbdist.daemons`)
    ray/        a Ray cluster behind the same API, magics and panel (``backend="ray"``)
"""

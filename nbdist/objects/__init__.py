"""Objects: the handles users hold and the memory values live in (layers L1-L2).

    refs.py     ObjectRef: a ref to a value in the cluster, counted while the driver holds it
    store.py    shared memory for large objects: one arena per node, files as the fallback,
                spilling to disk; zero-copy reads of numpy arrays and Arrow buffers
"""

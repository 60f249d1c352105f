"""Starting, joining and stopping clusters (layer L3).

    local.py        the embedded single-machine cluster of ``nbdist.init()``
    standalone.py   clusters that outlive a driver: ``nbdist start --head``, ``--address``, ``stop``
    lifetime.py     tying child processes to their parent's life (no orphans after a crash)
"""

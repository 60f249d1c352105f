"""Ray Train v2's module paths (``ray.train.v2...``), for programs that import from them.

Ray 2.60 runs Train v2 by default, and ``nbdist.train`` is that API already: every name here is
the same object as in ``nbdist.train`` (``v2.api...``), ``nbdist.train.torch`` (``v2.torch``)
or ``nbdist.train.tensorflow`` (``v2.tensorflow``).
"""

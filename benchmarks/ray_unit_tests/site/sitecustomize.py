"""Every Python process of an nbdist run (pytest, the drivers a test starts as scripts, the
cluster's workers) reads ``import ray`` as nbdist's, when ``NBDIST_AS_RAY=1``."""

import os

if os.environ.get("NBDIST_AS_RAY") == "1":
    import nbdist_as_ray

    nbdist_as_ray.install()

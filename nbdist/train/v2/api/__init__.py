"""``ray.train.v2.api``: the modules below, each re-exporting ``nbdist.train``'s objects."""

"""``ray.dag.output_node`` for code written for Ray (``from ray.dag.output_node import
MultiOutputNode``): the same class as ``nbdist.dag.MultiOutputNode``."""

from nbdist.dag.nodes import MultiOutputNode

__all__ = ["MultiOutputNode"]

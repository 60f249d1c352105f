"""``ray.dag.input_node`` for code written for Ray (``from ray.dag.input_node import
InputNode``): the same classes as ``nbdist.dag``."""

from nbdist.dag.nodes import DAGInputData, InputAttributeNode, InputNode

__all__ = ["DAGInputData", "InputAttributeNode", "InputNode"]

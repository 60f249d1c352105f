"""CompiledDAG: ``dag.experimental_compile()`` without a compiler.

Ray compiles a DAG of actor calls into channels between long-lived actors, so that each
``execute`` skips task submission. Here ``execute`` submits the same calls as
``DAGNode.execute`` and returns the same refs, so results match; what compiling keeps from
Ray's semantics is that the DAG's actors (its ClassNodes) are created once, when the DAG is
compiled, and serve every execution, so actor state carries over from one execution to the
next. ``teardown`` drops them.
"""

from __future__ import annotations

from nbdist.dag.nodes import CompiledDAG

__all__ = ["CompiledDAG"]

"""CompiledDAG: ``dag.experimental_compile()`` without a compiler.

Ray compiles a DAG of actor calls into channels between long-lived actors, so that each
``execute`` skips task submission. Here ``execute`` submits the same calls as
``DAGNode.execute`` and returns the same refs, so results match; what compiling keeps from
Ray's semantics is that the DAG's actors (its ClassNodes) are created once, when the DAG is
compiled, and serve every execution, so actor state carries over from one execution to the
next. ``teardown`` drops them.
"""

from __future__ import annotations

from typing import Any

from .nodes import ClassNode, DAGNode, _run


def _class_nodes(root: DAGNode) -> list[ClassNode]:
    found: dict[int, DAGNode] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in found:
            continue
        found[id(node)] = node
        stack.extend(node._children())
    return [n for n in found.values() if isinstance(n, ClassNode)]


class CompiledDAG:
    """A DAG prepared for repeated ``execute``; options of Ray's compiler are accepted."""

    def __init__(self, dag: DAGNode, **options: Any) -> None:
        self._dag = dag
        self._actors: dict[int, Any] | None = {}
        for node in _class_nodes(dag):
            # Created with no input: a ClassNode's arguments may not depend on the InputNode.
            _run(node, (), {}, self._actors)

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        """The DAG's output for this input: a ref, or a list of refs for a MultiOutputNode."""
        if self._actors is None:
            raise RuntimeError("This compiled DAG was torn down; compile the DAG again.")
        return _run(self._dag, args, kwargs, dict(self._actors))

    async def execute_async(self, *args: Any, **kwargs: Any) -> Any:
        return self.execute(*args, **kwargs)

    def teardown(self, kill_actors: bool = False) -> None:
        """Release the DAG's actors (they end once no other handle to them remains)."""
        if kill_actors and self._actors:
            import nbdist

            for actor in self._actors.values():
                if isinstance(actor, nbdist.ActorHandle):
                    nbdist.kill(actor)
        self._actors = None

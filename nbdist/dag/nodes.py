"""DAG nodes and their execution (Ray's ``ray.dag`` node types).

A node records one call that has not happened: what to call (a remote function, an actor
class, a method of an actor or of an actor still to be created) and its bound arguments, which
may hold other nodes, also inside lists, tuples and dicts. ``node.execute(*args, **kwargs)``
walks the graph below ``node`` in post-order and submits every node exactly once
(``.remote``), replacing each node in the arguments of the nodes above it by what it returned:

    InputNode           the execution's input: ``execute(x)`` gives ``x``; several arguments
                        or keywords give a `DAGInputData` (``inp[0]``, ``inp["k"]``, ``inp.k``)
    InputAttributeNode  ``inp[key]`` / ``inp.key`` of that input
    FunctionNode        ``fn.remote(...)`` -> ObjectRef (or refs, for ``num_returns``)
    ClassNode           ``ActorClass.remote(...)`` -> ActorHandle (one actor per execution)
    ClassMethodNode     ``handle.method.remote(...)`` -> ObjectRef; on a ClassNode, the method
                        calls bound earlier on the same ClassNode are submitted first, so an
                        actor sees its calls in bind order
    MultiOutputNode     a list of what its nodes returned

Refs flow along the edges, so a task starts when its inputs are ready, as with hand-written
``.remote`` chains; nothing waits in the driver. The walk keeps its own stack (no recursion), so a
long chain of nodes does not hit Python's recursion limit.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nbdist.backends.base import current

_NO_INPUT_CONTEXT = (
    "InputNode must be created in a `with InputNode() as inp:` block to be executed, as in "
    "Ray.")


def _nodes_in(value: Any) -> Iterator[DAGNode]:
    """The nodes inside ``value`` (itself, or nested in lists, tuples and dicts)."""
    if isinstance(value, DAGNode):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _nodes_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _nodes_in(item)


def _replace(value: Any, done: dict[int, Any]) -> Any:
    """``value`` with each node in it replaced by what that node returned."""
    if isinstance(value, DAGNode):
        return done[id(value)]
    if isinstance(value, list):
        return [_replace(v, done) for v in value]
    if isinstance(value, tuple):
        return tuple(_replace(v, done) for v in value)
    if isinstance(value, dict):
        return {k: _replace(v, done) for k, v in value.items()}
    return value


class DAGNode:
    """A call that is part of a DAG; ``execute`` runs the DAG below it."""

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any], options: dict[str, Any],
                 other: dict[str, Any] | None = None) -> None:
        self._bound_args = tuple(args)
        self._bound_kwargs = dict(kwargs)
        self._bound_options = dict(options)
        # Nodes (or values) this one needs besides its arguments: an actor, a previous call.
        self._bound_other_args_to_resolve = dict(other or {})

    def get_args(self) -> tuple[Any, ...]:
        return self._bound_args

    def get_kwargs(self) -> dict[str, Any]:
        return self._bound_kwargs

    def get_options(self) -> dict[str, Any]:
        return self._bound_options

    def get_other_args_to_resolve(self) -> dict[str, Any]:
        return self._bound_other_args_to_resolve

    def options(self, **options: Any) -> DAGNode:
        """Set options for this node's call (as ``.options`` on what it calls)."""
        self._bound_options.update(options)
        return self

    def _children(self) -> list[DAGNode]:
        seen: dict[int, DAGNode] = {}
        for part in (self._bound_args, self._bound_kwargs,
                     self._bound_other_args_to_resolve):
            for node in _nodes_in(part):
                seen.setdefault(id(node), node)
        return list(seen.values())

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        """Submit the DAG below this node with ``args``/``kwargs`` as the InputNode's value;
        returns this node's ref (a handle for a ClassNode, a list for a MultiOutputNode)."""
        return _run(self, args, kwargs, {})

    def experimental_compile(self, **options: Any) -> Any:
        """This DAG ready to execute many times with its actors created once (see
        `nbdist.dag.CompiledDAG`)."""
        return CompiledDAG(self, **options)

    def _execute_impl(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                      other: dict[str, Any], inputs: tuple[tuple[Any, ...], dict[str, Any]]
                      ) -> Any:
        raise NotImplementedError

    def _repr_html_(self) -> str:
        """In a notebook, a bound DAG shows as a small graph (see `nbdist.dag.display`)."""
        from nbdist.dag.display import dag_html

        return dag_html(self)

    def __getstate__(self) -> Any:
        raise TypeError("A DAG node cannot be passed to a task or actor: bind it into the DAG "
                        "as an argument instead, or pass what execute() returned.")


def _run(root: DAGNode, args: tuple[Any, ...], kwargs: dict[str, Any],
         done: dict[int, Any]) -> Any:
    """Submit every node below ``root`` not already in ``done`` (id -> result), children
    first, in the order they are met; returns ``root``'s result."""
    stack: list[tuple[DAGNode, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in done:
            continue
        if not expanded:
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(node._children())
                         if id(child) not in done)
            continue
        done[id(node)] = node._execute_impl(
            _replace(node._bound_args, done), _replace(node._bound_kwargs, done),
            _replace(node._bound_other_args_to_resolve, done), (args, kwargs))
    return done[id(root)]


class DAGInputData:
    """The input of an execution given several arguments: ``[i]`` for the i-th positional
    one, ``["k"]`` or ``.k`` for keyword ``k``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._args = list(args)
        self._kwargs = kwargs

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, int):
            return self._args[key]
        if isinstance(key, str):
            return self._kwargs[key]
        raise ValueError("Use an int index or a str key to read the DAG's input.")


class InputNode(DAGNode):
    """The input of a DAG; build the DAG inside ``with InputNode() as inp:``."""

    def __init__(self, *args: Any, input_type: Any = None, **kwargs: Any) -> None:
        if args or kwargs:
            raise ValueError("InputNode should not take any args or kwargs.")
        super().__init__((), {}, {})
        self.input_type = input_type
        self._in_context = False
        self._attributes: dict[tuple[str, Any], InputAttributeNode] = {}

    def __enter__(self) -> InputNode:
        self._in_context = True
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def _attribute(self, key: Any, accessor: str) -> InputAttributeNode:
        node = self._attributes.get((accessor, key))
        if node is None:
            node = self._attributes[(accessor, key)] = InputAttributeNode(self, key, accessor)
        return node

    def __getitem__(self, key: int | str) -> InputAttributeNode:
        if not isinstance(key, (int, str)):
            raise TypeError("Use an int index or a str key to read the DAG's input.")
        return self._attribute(key, "__getitem__")

    def __getattr__(self, key: str) -> InputAttributeNode:
        # Display hooks (``_repr_*_``, IPython's ``_ipython_*``) are not input fields.
        if key.startswith(("__", "_bound", "_repr_", "_ipython_")) or key in (
                "_attributes", "_in_context", "input_type"):
            raise AttributeError(key)
        return self._attribute(key, "__getattr__")

    def _execute_impl(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                      other: dict[str, Any], inputs: tuple[tuple[Any, ...], dict[str, Any]]
                      ) -> Any:
        if not self._in_context:
            raise ValueError(_NO_INPUT_CONTEXT)
        given, named = inputs
        if len(given) == 1 and not named:
            return given[0]
        return DAGInputData(*given, **named)

    def __repr__(self) -> str:
        return "InputNode()"


class InputAttributeNode(DAGNode):
    """``inp[key]`` or ``inp.key`` of a DAG's input."""

    def __init__(self, input_node: InputNode, key: int | str, accessor: str) -> None:
        super().__init__((), {}, {}, {"dag_input_node": input_node})
        self._key = key
        self._accessor = accessor

    @property
    def key(self) -> int | str:
        return self._key

    def _execute_impl(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                      other: dict[str, Any], inputs: tuple[tuple[Any, ...], dict[str, Any]]
                      ) -> Any:
        value = other["dag_input_node"]
        if isinstance(value, DAGInputData) or isinstance(self._key, int):
            return value[self._key]
        if self._accessor == "__getattr__":
            return getattr(value, self._key)
        return value[self._key]

    def __repr__(self) -> str:
        return f"InputAttributeNode({self._key!r})"


class FunctionNode(DAGNode):
    """A call of a remote function: ``fn.bind(*args, **kwargs)``."""

    def __init__(self, remote_function: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                 options: dict[str, Any] | None = None) -> None:
        super().__init__(args, kwargs, options or {})
        self._body = remote_function

    def _execute_impl(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                      other: dict[str, Any], inputs: tuple[tuple[Any, ...], dict[str, Any]]
                      ) -> Any:
        fn = self._body.options(**self._bound_options) if self._bound_options else self._body
        return fn.remote(*args, **kwargs)

    def __repr__(self) -> str:
        return f"FunctionNode({getattr(self._body, '__name__', self._body)})"


class ClassNode(DAGNode):
    """The creation of an actor: ``ActorClass.bind(*args, **kwargs)``; ``node.method.bind``
    binds a call on that actor."""

    def __init__(self, actor_class: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                 options: dict[str, Any] | None = None) -> None:
        super().__init__(args, kwargs, options or {})
        self._body = actor_class
        self._last_call: ClassMethodNode | None = None

    def _execute_impl(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                      other: dict[str, Any], inputs: tuple[tuple[Any, ...], dict[str, Any]]
                      ) -> Any:
        cls = self._body.options(**self._bound_options) if self._bound_options else self._body
        return cls.remote(*args, **kwargs)

    def __getattr__(self, name: str) -> _UnboundClassMethod:
        if name.startswith("_"):
            raise AttributeError(name)
        if name == "bind":
            raise AttributeError(f".bind() cannot be used again on {type(self).__name__}")
        getattr(self._body.__wrapped__, name)  # AttributeError for a method the class lacks
        return _UnboundClassMethod(self, name)

    def __repr__(self) -> str:
        return f"ClassNode({getattr(self._body, '__name__', self._body)})"


class _UnboundClassMethod:
    """``class_node.method``: ``.bind(...)`` makes the call's node; ``.options(...)`` first."""

    def __init__(self, actor: ClassNode, method: str) -> None:
        self._actor = actor
        self._method = method
        self._options: dict[str, Any] = {}

    def bind(self, *args: Any, **kwargs: Any) -> ClassMethodNode:
        node = ClassMethodNode(self._method, args, kwargs, self._options, self._actor,
                               self._actor._last_call)
        self._actor._last_call = node
        return node

    def options(self, **options: Any) -> _UnboundClassMethod:
        self._options = options
        return self

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        raise AttributeError(".remote() cannot be used on a method of a ClassNode. Use "
                             ".bind() to add the call to the DAG.")


class ClassMethodNode(DAGNode):
    """A call of an actor method: on a ClassNode's actor (``actor`` is the ClassNode), or
    of an existing actor's method object (``actor`` is that object, options included)."""

    def __init__(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                 options: dict[str, Any], actor: Any, previous: ClassMethodNode | None = None,
                 output_of: tuple[ClassMethodNode, int] | None = None) -> None:
        other: dict[str, Any] = {"parent_class_node": actor}
        if previous is not None:
            other["prev_class_method_call"] = previous
        if output_of is not None:
            other["class_method_call"] = output_of[0]
        super().__init__(args, kwargs, options, other)
        self._method_name = method
        self._output_index = None if output_of is None else output_of[1]

    @property
    def is_class_method_output(self) -> bool:
        return self._output_index is not None

    def _execute_impl(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                      other: dict[str, Any], inputs: tuple[tuple[Any, ...], dict[str, Any]]
                      ) -> Any:
        if self._output_index is not None:
            return other["class_method_call"][self._output_index]
        method = other["parent_class_node"]
        if isinstance(self._bound_other_args_to_resolve["parent_class_node"], DAGNode):
            method = getattr(method, self._method_name)
        if self._bound_options:
            method = method.options(**self._bound_options)
        return method.remote(*args, **kwargs)

    def __repr__(self) -> str:
        return f"ClassMethodNode({self._method_name}())"


class MultiOutputNode(DAGNode):
    """Several nodes as one DAG output: executes to the list of their results."""

    def __init__(self, nodes: list[Any] | tuple[Any, ...],
                 other: dict[str, Any] | None = None) -> None:
        if not isinstance(nodes, (list, tuple)):
            raise ValueError(f"MultiOutputNode takes a list of nodes, not {type(nodes).__name__}")
        super().__init__(tuple(nodes), {}, {}, other)

    def _execute_impl(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                      other: dict[str, Any], inputs: tuple[tuple[Any, ...], dict[str, Any]]
                      ) -> Any:
        return list(args)

    def __repr__(self) -> str:
        return f"MultiOutputNode({len(self._bound_args)})"


# --------------------------------------------------------------------- ``.bind`` entry points
def bind_function(remote_function: Any, args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> FunctionNode:
    return FunctionNode(remote_function, args, kwargs)


def bind_class(actor_class: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> ClassNode:
    return ClassNode(actor_class, args, kwargs)


def bind_method(method: Any, name: str, num_returns: int, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> ClassMethodNode | tuple[ClassMethodNode, ...]:
    """A call of ``method`` (an existing actor's method object, with its options); a method
    with several returns gives one node per return (each executes to its own ref), as Ray's."""
    node = ClassMethodNode(name, args, kwargs, {}, method)
    if num_returns <= 1:
        return node
    return tuple(ClassMethodNode(name, (), {}, {}, method, output_of=(node, i))
                 for i in range(num_returns))


# ---------------------------------------------------------------- compiled (see compiled.py)
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

    def visualize(self, filename: str = "compiled_graph", format: str = "png",
                  view: bool = False, channel_details: bool = False) -> str | None:
        """The DAG's graph, as Ray's method draws it: ``format="ascii"`` gives it as text
        (printed, and None returned, when ``view``); another format is rendered to
        ``filename.format`` by the ``graphviz`` package and its DOT text returned. There are
        no channels here, so ``channel_details`` adds nothing."""
        from nbdist.dag.display import dag_dot, dag_text

        if format == "ascii":
            text = dag_text(self._dag)
            if view:
                print(text, end="")
                return None
            return text
        try:
            import graphviz
        except ImportError:
            raise ImportError(
                "Please install graphviz to visualize the compiled graph (pip install "
                "graphviz), or use visualize(format='ascii').") from None
        dot = dag_dot(self._dag)
        graphviz.Source(dot).render(filename, format=format, view=view)
        return dot

    def teardown(self, kill_actors: bool = False) -> None:
        """Release the DAG's actors (they end once no other handle to them remains)."""
        if kill_actors and self._actors:
            for actor in self._actors.values():  # handles: what ClassNodes' .remote made
                current.backend.kill(actor, True)
        self._actors = None

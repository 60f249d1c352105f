"""``ray.actor`` for code written for Ray: its actor classes, which code annotates with
(``progress_actor: ray.actor.ActorHandle`` in Ray's getting-started example), and
`exit_actor`. The same classes are ``nbdist.ActorClass`` and ``nbdist.ActorHandle``."""

from typing import NoReturn

from nbdist.backends.base import current
from nbdist.driver.actor import ActorClass, ActorHandle, ActorMethod

__all__ = ["ActorClass", "ActorHandle", "ActorMethod", "exit_actor"]


class _ExitActor(SystemExit):
    """What `exit_actor` raises: the worker ends the actor for good (no restart) once the
    call is answered, as for ``sys.exit(0)``."""

    exit_actor = True


def exit_actor() -> NoReturn:
    """End the current actor on purpose, as Ray's ``ray.actor.exit_actor``: the call that
    called it and every call not yet started fail with ActorDiedError, and the actor is not
    restarted. Raises TypeError outside an actor's method."""
    client = current.client
    if client is None and type(current.backend).__module__.startswith("nbdist.backends.ray"):
        import ray.actor

        ray.actor.exit_actor()  # raises
    if client is None or not client.ctx.actor_id:
        raise TypeError("exit_actor() was called outside an actor. Call it inside an actor's "
                        "method to end that actor; use nbdist.kill(handle) to end an actor "
                        "from outside.")
    raise _ExitActor(0)

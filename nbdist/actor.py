"""``ray.actor`` for code written for Ray: its actor classes, which code annotates with
(``progress_actor: ray.actor.ActorHandle`` in Ray's getting-started example). The same classes
are ``nbdist.ActorClass`` and ``nbdist.ActorHandle``."""

from nbdist.driver.actor import ActorClass, ActorHandle, ActorMethod

__all__ = ["ActorClass", "ActorHandle", "ActorMethod"]

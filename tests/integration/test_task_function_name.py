"""``get_runtime_context().get_task_function_name()`` names the running function as Ray does:
``module.function`` for a task, ``module.Class.method`` for an actor call of any kind."""

from __future__ import annotations

import nbdist


@nbdist.remote
def function_name():
    return nbdist.get_runtime_context().get_task_function_name()


@nbdist.remote
class Named:
    def sync_name(self):
        return nbdist.get_runtime_context().get_task_function_name()

    async def async_name(self):
        return nbdist.get_runtime_context().get_task_function_name()


@nbdist.remote(max_concurrency=2)
class Threaded:
    def threaded_name(self):
        return nbdist.get_runtime_context().get_task_function_name()


def test_a_task_and_every_kind_of_actor_call_give_their_function_names(cluster) -> None:
    module = __name__
    assert nbdist.get(function_name.remote(), timeout=60) == f"{module}.function_name"
    named = Named.remote()
    assert nbdist.get(named.sync_name.remote(), timeout=60) == f"{module}.Named.sync_name"
    assert nbdist.get(named.async_name.remote(), timeout=60) == f"{module}.Named.async_name"
    threaded = Threaded.remote()
    assert (nbdist.get(threaded.threaded_name.remote(), timeout=60)
            == f"{module}.Threaded.threaded_name")


def test_the_driver_has_no_task_function_name(cluster) -> None:
    assert nbdist.get_runtime_context().get_task_function_name() is None

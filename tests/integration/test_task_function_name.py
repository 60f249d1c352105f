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


def test_an_async_method_of_a_class_made_in_a_function_is_named_by_its_qualified_name(
        cluster) -> None:
    # Ray's own naming: an async actor method by its qualified name, a sync one by its class.
    @nbdist.remote
    class Local:
        def sync_name(self):
            return nbdist.get_runtime_context().get_task_function_name()

        async def async_name(self):
            return nbdist.get_runtime_context().get_task_function_name()

    local = Local.remote()
    module = __name__
    here = "test_an_async_method_of_a_class_made_in_a_function_is_named_by_its_qualified_name"
    assert nbdist.get(local.sync_name.remote(), timeout=60) == f"{module}.Local.sync_name"
    assert (nbdist.get(local.async_name.remote(), timeout=60)
            == f"{module}.{here}.<locals>.Local.async_name")

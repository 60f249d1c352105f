"""Actors beyond the basics, on both backends: ``async def __init__``, ``sys.exit()`` in an
actor method or a task, fate sharing with the creating actor, the actor's ``__repr__`` in
output prefixes, concurrency groups, ``__ray_ready__``."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest
from polling import poll

import nbdist
from nbdist.exceptions import ActorDiedError, WorkerCrashedError

pytestmark = pytest.mark.timeout(180)


@nbdist.remote
class AsyncInit:
    async def __init__(self, value):
        await asyncio.sleep(0)
        self.value = value
        self.ticker = asyncio.get_running_loop().create_task(self.tick())
        self.ticks = 0

    async def tick(self):
        while True:
            self.ticks += 1
            await asyncio.sleep(0.01)

    async def get(self):
        return self.value

    async def ticking(self):
        return self.ticks


@nbdist.remote
class Quitter:
    def quit(self):
        sys.exit(0)

    def ping(self):
        return "pong"


@nbdist.remote(max_retries=0)
def quit_task():
    sys.exit(3)


@nbdist.remote
class Child:
    def ping(self):
        return "pong"


@nbdist.remote
class Parent:
    def __init__(self):
        self.children = []

    def ping(self):
        return "pong"

    def make_child(self, detached):
        opts = {"lifetime": "detached"} if detached else {}
        child = Child.options(**opts).remote()
        self.children.append(child)
        return [child]


@nbdist.remote
class Named:
    def __init__(self, label):
        self.label = label

    def __repr__(self):
        return f"Named({self.label})"

    def say(self, text):
        print(text)


@nbdist.remote(concurrency_groups={"io": 2, "compute": 1})
class Grouped:
    def __init__(self):
        self.event = threading.Event()

    @nbdist.method(concurrency_group="io")
    def wait_io(self):
        return self.event.wait(60)

    @nbdist.method(concurrency_group="io")
    def open_io(self):
        self.event.set()
        return True

    @nbdist.method(concurrency_group="compute")
    def compute(self, x):
        return x * 2

    def default(self):
        return "default"


@nbdist.remote(concurrency_groups={"io": 2}, max_concurrency=1)
class AsyncGrouped:
    """The default group runs one call at a time: ``open`` runs only beside an io call.

    The gate is a thread-safe event: on Ray each group of an async actor has an event loop
    thread of its own (nbdist's engine runs all groups on one loop), and an asyncio.Event
    set from another loop's thread would not wake its waiter."""

    def __init__(self):
        self.event = threading.Event()

    @nbdist.method(concurrency_group="io")
    async def wait_io(self):
        return await asyncio.get_running_loop().run_in_executor(None, self.event.wait, 60)

    async def open(self):
        self.event.set()
        return True


def dead(actor) -> bool:
    try:
        nbdist.get(actor.ping.remote(), timeout=30)
    except ActorDiedError:
        return True
    return False


def test_async_init_runs_on_the_actors_loop(backend) -> None:
    actor = AsyncInit.remote(7)
    assert nbdist.get(actor.get.remote()) == 7
    # A task the constructor started keeps running on the actor's loop.
    poll(lambda: nbdist.get(actor.ticking.remote()) > 2, timeout=60)


def test_every_actor_answers_ray_ready_once_constructed(backend) -> None:
    # Sync, async and threaded actors alike; the user's class defines no such method.
    for actor in (Quitter.remote(), AsyncInit.remote(1), Quitter.options(
            max_concurrency=2).remote()):
        assert nbdist.get(actor.__ray_ready__.remote(), timeout=60) is True
    assert nbdist.get(actor.ping.remote()) == "pong"


def test_sys_exit_in_an_actor_method_ends_the_actor(backend) -> None:
    actor = Quitter.remote()
    assert nbdist.get(actor.ping.remote()) == "pong"
    with pytest.raises(ActorDiedError):
        nbdist.get(actor.quit.remote())
    with pytest.raises(ActorDiedError):
        nbdist.get(actor.ping.remote())


def test_sys_exit_in_a_task_is_a_crash_not_the_callers_exit(backend) -> None:
    with pytest.raises(WorkerCrashedError) as info:
        nbdist.get(quit_task.remote())
    assert not isinstance(info.value, SystemExit)


def test_an_actor_dies_with_the_actor_that_created_it(backend) -> None:
    parent = Parent.remote()
    [child] = nbdist.get(parent.make_child.remote(False))
    assert nbdist.get(child.ping.remote()) == "pong"
    nbdist.kill(parent)
    poll(lambda: dead(child), timeout=60)


def test_a_detached_actor_outlives_its_creator(backend) -> None:
    parent = Parent.remote()
    [child] = nbdist.get(parent.make_child.remote(True))
    nbdist.kill(parent)
    poll(lambda: dead(parent), timeout=60)
    try:
        assert nbdist.get(child.ping.remote()) == "pong"
    finally:
        nbdist.kill(child)


def test_output_lines_name_the_actor_by_its_repr(backend, capsys) -> None:
    actor = Named.remote("alpha")
    nbdist.get(actor.say.remote("hello from alpha"))
    seen: list[str] = []

    def printed():
        seen.append(capsys.readouterr().out)
        return "hello from alpha" in "".join(seen)

    poll(printed, timeout=60)
    line = next(x for x in "".join(seen).splitlines() if "hello from alpha" in x)
    assert line.startswith("(Named(alpha) pid=")


def test_methods_of_a_concurrency_group_run_beside_each_other(backend) -> None:
    actor = Grouped.remote()
    waiting = actor.wait_io.remote()
    # The io group has room for two: the second io call runs while the first waits.
    assert nbdist.get(actor.open_io.remote(), timeout=60) is True
    assert nbdist.get(waiting, timeout=60) is True
    assert nbdist.get(actor.compute.remote(21)) == 42
    assert nbdist.get(actor.default.remote()) == "default"


def test_a_call_may_choose_its_concurrency_group(backend) -> None:
    actor = Grouped.remote()
    waiting = [actor.wait_io.remote() for _ in range(2)]
    # Both io places are taken: only in another group can this call open the gate.
    opener = actor.open_io.options(concurrency_group="compute")
    assert nbdist.get(opener.remote(), timeout=30) is True
    assert nbdist.get(waiting, timeout=60) == [True, True]


def test_async_concurrency_groups(backend) -> None:
    actor = AsyncGrouped.remote()
    waiting = actor.wait_io.remote()
    assert nbdist.get(actor.open.remote(), timeout=60) is True
    assert nbdist.get(waiting, timeout=60) is True


def test_an_undeclared_group_is_refused(backend) -> None:
    class Stray:
        @nbdist.method(concurrency_group="nowhere")
        def m(self):
            return 1

    with pytest.raises(ValueError, match="nowhere"):
        nbdist.remote(concurrency_groups={"io": 1})(Stray)


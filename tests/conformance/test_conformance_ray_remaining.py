"""Ray's documented behaviour that its own unit tests check, on both backends: the deprecated
runtime-context id properties warn, the dashboard's address, a task that asks for a resource
no node has, a function too big to ship, and the state a cancelled task is listed in."""

from __future__ import annotations

import time
import warnings
from typing import Any

import pytest
from polling import poll

import nbdist
from nbdist.util.state import list_tasks

DEPRECATED = {"job_id": "get_job_id()", "node_id": "get_node_id()",
              "current_placement_group_id": "get_placement_group_id()"}


def _warned(call: Any) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        call()
    return [w for w in seen if issubclass(w.category, DeprecationWarning)]


def test_the_deprecated_context_ids_warn_and_the_get_calls_do_not(backend) -> None:
    ctx = nbdist.get_runtime_context()
    for name, instead in DEPRECATED.items():
        seen = _warned(lambda name=name: getattr(ctx, name))
        assert any(f"Use {instead} instead" in str(w.message) for w in seen), (name, seen)
    assert _warned(ctx.get_resource_ids)
    assert _warned(ctx.get)
    assert not _warned(lambda: (ctx.get_job_id(), ctx.get_node_id(), ctx.get_task_id(),
                                ctx.get_placement_group_id()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert ctx.node_id.hex() == ctx.get_node_id()


@nbdist.remote
def _ids_inside() -> tuple[bool, bool]:
    ctx = nbdist.get_runtime_context()
    task = _warned(lambda: ctx.task_id)
    return (any("Use get_task_id() instead" in str(w.message) for w in task),
            not _warned(ctx.get_task_id))


def test_a_task_is_warned_about_its_deprecated_task_id_too(backend) -> None:
    assert nbdist.get(_ids_inside.remote(), timeout=120) == (True, True)


def test_the_dashboard_url_is_the_init_address_infos(backend) -> None:
    url = nbdist.get_dashboard_url()
    assert isinstance(url, str)
    if backend == "nbdist":
        assert url == ""  # no dashboard server: nbdist's views are the notebook's panel
    else:
        assert url == "" or ":" in url  # Ray's, with a dashboard or without


def test_a_function_or_actor_capturing_over_100_mb_is_refused_at_remote(backend) -> None:
    captured = b"\0" * (101 * 2**20)  # over the limit of 10**8 bytes (Ray's default)

    @nbdist.remote
    def big() -> int:
        return len(captured)

    @nbdist.remote
    class BigActor:
        def size(self) -> int:
            return len(captured)

    with pytest.raises(ValueError, match=r"The remote function .*big is too large"):
        big.remote()
    with pytest.raises(ValueError, match=r"The actor BigActor is too large"):
        BigActor.remote()

    @nbdist.remote
    def small() -> int:
        return 1

    assert nbdist.get(small.remote(), timeout=120) == 1  # the refusal left the driver usable


@nbdist.remote(num_cpus=0)
def _runs_until_cancelled(started: Any) -> None:
    nbdist.get(started.send.remote())
    while True:
        time.sleep(0.05)


@nbdist.remote(num_cpus=0)
class _Flag:
    def __init__(self) -> None:
        self.sent = False

    def send(self) -> None:
        self.sent = True

    def is_set(self) -> bool:
        return self.sent


def _final_state(name: str) -> str:
    def state() -> str | None:
        rows = list_tasks(filters=[("name", "=", name)])
        done = [r["state"] for r in rows if r["state"] in ("FINISHED", "FAILED")]
        return done[0] if done else None

    return str(poll(state, timeout=120, what=f"the cancelled task {name} listed as ended"))


def test_a_cancelled_task_is_listed_finished_if_it_ran_else_failed(backend) -> None:
    flag = _Flag.remote()
    running = _runs_until_cancelled.options(name="cancelled-while-running").remote(flag)
    poll(lambda: nbdist.get(flag.is_set.remote(), timeout=60), timeout=120,
         what="the task started")
    never = _answer.options(name="cancelled-before-it-ran",
                            resources={"NonexistentCustom": 1}).remote()
    nbdist.cancel(running)
    nbdist.cancel(never)
    for ref in (running, never):
        with pytest.raises(nbdist.exceptions.TaskCancelledError):
            nbdist.get(ref, timeout=120)
    # Ray lists a task whose running body the cancel interrupted as FINISHED (its worker
    # ended it), and one that never ran as FAILED.
    assert _final_state("cancelled-while-running") == "FINISHED"
    assert _final_state("cancelled-before-it-ran") == "FAILED"


@nbdist.remote
def _answer() -> int:
    return 42


def test_a_task_asking_for_a_resource_no_node_has_is_pending_not_ready(backend) -> None:
    infeasible = _answer.options(resources={"NonexistentCustom": 1}).remote()
    assert nbdist.get(_answer.remote(), timeout=120) == 42  # other work goes on
    ready, pending = nbdist.wait([infeasible], timeout=0.05)
    assert (ready, pending) == ([], [infeasible])
    with pytest.raises(nbdist.exceptions.GetTimeoutError):
        nbdist.get(infeasible, timeout=0.5)
    nbdist.cancel(infeasible)
    with pytest.raises((nbdist.exceptions.TaskCancelledError, ValueError)):
        nbdist.get(infeasible, timeout=120)


@nbdist.remote(num_cpus=0)
class _Keeper:
    def __init__(self) -> None:
        self.kept: list[Any] = []

    def keep(self, refs: list[Any]) -> None:
        self.kept = refs

    def get_kept(self) -> list[Any]:
        return self.kept


@nbdist.remote(num_cpus=0)
class _Spawner:
    def ping(self) -> int:
        return 1

    def spawn_and_wait(self, keeper: Any, started: Any) -> None:
        child = _runs_until_cancelled.remote(started)
        nbdist.get(keeper.keep.remote([child]))
        nbdist.get(child)


def test_a_recursive_cancel_of_an_actor_call_cancels_the_tasks_it_submitted(backend) -> None:
    keeper, started, spawner = _Keeper.remote(), _Flag.remote(), _Spawner.remote()
    # Calls after the first go straight to the actor's worker on nbdist (a direct call).
    assert nbdist.get([spawner.ping.remote() for _ in range(3)], timeout=120) == [1, 1, 1]
    call = spawner.spawn_and_wait.remote(keeper, started)
    poll(lambda: nbdist.get(started.is_set.remote(), timeout=60), timeout=120,
         what="the child task started")
    # The child may start before the call has handed its ref to the keeper.
    (child,) = poll(lambda: nbdist.get(keeper.get_kept.remote(), timeout=60), timeout=120,
                    what="the call kept its child's ref")
    nbdist.cancel(call, recursive=True)
    with pytest.raises(nbdist.exceptions.TaskCancelledError):
        nbdist.get(child, timeout=120)
    with pytest.raises((nbdist.exceptions.TaskCancelledError, nbdist.exceptions.RayTaskError)):
        nbdist.get(call, timeout=120)  # its get of the child raised

"""Direct actor calls (nbdist/driver/direct.py): a driver's calls to an actor on its node go over a
link to the actor's worker. Checked here: that they do, that every actor semantic holds across
the switch between the node and the link (order, arguments not ready yet, failed arguments,
refs that escape to other work, results the node must hold, output, cancel, kill, restarts),
and that nothing is left behind in the node or in shared memory.

Whether a call went over a link is read from the driver's own count (``direct.sent``); what the
node holds, from its ``node_info``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
from polling import poll, retrying, until

import nbdist
from nbdist import exceptions
from nbdist.driver import runtime

pytestmark = [pytest.mark.timeout(90), pytest.mark.usefixtures("cluster")]


def direct_sent() -> int:
    client = runtime.current()
    assert client.direct is not None, "this driver makes no direct calls"
    return client.direct.sent


def node_objects() -> int:
    return int(runtime.current().control("node_info")["objects"])


@nbdist.remote
class Log:
    def __init__(self) -> None:
        self.items: list = []

    def add(self, item) -> int:
        self.items.append(item)
        return len(self.items)

    def slow_add(self, item, seconds: float) -> int:
        time.sleep(seconds)
        return self.add(item)

    def all(self) -> list:
        return self.items

    def echo(self, value):
        return value

    def shout(self, text: str) -> str:
        print("shouting", text)
        return text.upper()

    def big(self, n: int):
        return np.arange(n, dtype=np.float64)

    def wrap(self, value) -> list:
        return [nbdist.put(value)]

    def pid(self) -> int:
        return os.getpid()

    def wait_for(self, started: str, gate: str) -> str:
        Path(started).touch()
        opened = until(lambda: os.path.exists(gate), timeout=60)
        return "released" if opened else "gate never opened"


@nbdist.remote
def slow_value(value, seconds: float):
    time.sleep(seconds)
    return value


@nbdist.remote
def fails() -> None:
    raise KeyError("from a task")


@nbdist.remote
def plus_one(x: int) -> int:
    return x + 1


@nbdist.remote
def first_of(refs: list) -> object:
    return nbdist.get(refs[0])


def warm(actor) -> None:
    """One call through the node, so the driver learns the actor's worker and links to it."""
    nbdist.get(actor.all.remote())


def test_calls_after_the_first_go_over_a_link_in_order() -> None:
    log = Log.remote()
    burst = [log.add.remote(i) for i in range(100)]  # before the actor is known: the node
    before = direct_sent()
    assert nbdist.get(burst) == list(range(1, 101))
    more = [log.add.remote(i) for i in range(100, 300)]
    assert nbdist.get(more) == list(range(101, 301))
    assert direct_sent() - before >= 200
    assert nbdist.get(log.all.remote()) == list(range(300))


def test_many_pipelined_calls_all_arrive() -> None:
    log = Log.remote()
    warm(log)
    for _ in range(3):  # a get racing the answers must find each value (never ask the node)
        assert nbdist.get([log.echo.remote(i) for i in range(5000)]) == list(range(5000))


def test_order_holds_while_calls_switch_from_the_node_to_the_link() -> None:
    log = Log.remote()
    refs = [log.slow_add.remote(0, 0.3)]  # still running through the node ...
    sent = direct_sent()

    def one_more_call() -> bool:
        refs.append(log.add.remote(len(refs)))  # ... these wait behind it, then the link
        return direct_sent() > sent  # takes over

    poll(one_more_call, timeout=30, interval=0.002, what="a call to go over a link")
    i = len(refs)
    refs += [log.add.remote(j) for j in range(i, i + 50)]
    nbdist.get(refs)
    assert nbdist.get(log.all.remote()) == list(range(i + 50))


def test_arguments_ready_pending_and_failed() -> None:
    log = Log.remote()
    warm(log)
    sent = direct_sent()
    assert nbdist.get(log.echo.remote(nbdist.put("stored"))) == "stored"
    pending = slow_value.remote("computed later", 0.5)
    assert nbdist.get(log.echo.remote(pending)) == "computed later"
    with pytest.raises(KeyError, match="from a task"):
        nbdist.get(log.echo.remote(fails.remote()))
    assert direct_sent() - sent == 3
    assert nbdist.get(log.echo.remote(7)) == 7, "the actor survives a failed argument"


def test_a_result_still_on_its_way_as_an_argument_of_another_actor() -> None:
    a, b = Log.remote(), Log.remote()
    warm(a)
    warm(b)
    later = a.slow_add.remote("x", 0.3)
    assert nbdist.get(b.echo.remote(later)) == 1


def test_each_call_taking_the_last_result_is_served_without_waiting_for_the_flusher(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A call whose argument is the previous call's result, still on its way: the worker asks
    the node for it, and the driver registers it there as soon as it arrives, not at the
    flusher's next round (a chain of calls once took a flush interval per call)."""
    log = Log.remote()
    warm(log)
    client = runtime.current()
    monkeypatch.setattr(runtime, "FLUSH_S", 600.0)
    client.flush_ref_ops_soon()  # the flusher's next wait is the long one
    try:
        sent = direct_sent()
        value = log.echo.remote(0)
        for _ in range(5):
            value = log.echo.remote(value)
        assert nbdist.get(value, timeout=30) == 0
        assert direct_sent() - sent == 6
    finally:
        monkeypatch.setattr(runtime, "FLUSH_S", 0.02)
        client.flush_ref_ops_soon()


def test_direct_results_escape_to_tasks_and_into_other_objects() -> None:
    log = Log.remote()
    warm(log)
    value = log.echo.remote(41)
    assert nbdist.get(plus_one.remote(value)) == 42  # named to the node as an argument
    inner = log.echo.remote("inside a list")
    assert nbdist.get(first_of.remote([inner])) == "inside a list"  # pickled into arguments
    boxed = nbdist.put([log.echo.remote("inside a put")])
    assert nbdist.get(nbdist.get(boxed)[0]) == "inside a put"
    pending = log.slow_add.remote("y", 0.3)  # escapes before it arrives
    assert nbdist.get(plus_one.remote(pending)) == 2


def test_refs_nested_in_arguments_stay_alive_while_the_call_runs() -> None:
    log = Log.remote()
    warm(log)
    ref = log.slow_add.remote([nbdist.put("kept")], 0.3)  # the caller drops the put's ref
    assert nbdist.get(ref) == 1
    stored = nbdist.get(log.all.remote())[0]
    assert nbdist.get(stored[0]) == "kept"


def test_results_the_node_must_hold(shm_files, wait_until) -> None:
    log = Log.remote()
    warm(log)
    files = shm_files()
    arr = nbdist.get(log.big.remote(1_000_000))  # 8 MB: shared memory
    assert arr[-1] == 999_999 and not arr.flags.writeable
    del arr
    wait_until(lambda: shm_files() <= files, timeout=30, what="the result's file to go")
    wrapped = nbdist.get(log.wrap.remote("held by the result"))
    assert nbdist.get(wrapped[0]) == "held by the result"


def test_output_arrives_before_the_result(capfd: pytest.CaptureFixture[str]) -> None:
    log = Log.remote()
    warm(log)
    sent = direct_sent()
    assert nbdist.get(log.shout.remote("hello")) == "HELLO"
    assert direct_sent() == sent + 1
    out = capfd.readouterr().out
    assert "shouting hello" in out and "(Log.shout pid=" in out


def test_dropped_handle_still_gets_its_calls_answered() -> None:
    log = Log.remote()
    warm(log)
    ref = log.slow_add.remote("last", 0.3)
    del log
    assert nbdist.get(ref, timeout=30) == 1


def test_cancel_of_a_queued_direct_call(tmp_path: Path, wait_until) -> None:
    log = Log.remote()
    warm(log)
    started, gate = tmp_path / "started", tmp_path / "gate"
    running = log.wait_for.remote(str(started), str(gate))
    queued = log.add.remote("never")
    wait_until(started.exists, timeout=30, what="the first call to start")
    nbdist.cancel(queued)
    # A sync method that has started runs to its end (as in Ray: no half-changed state); the
    # worker reads the cancel when it is free again, before it would start the queued call.
    nbdist.cancel(running)
    gate.touch()
    assert nbdist.get(running, timeout=30) == "released"
    with pytest.raises(exceptions.TaskCancelledError):
        nbdist.get(queued, timeout=30)
    assert nbdist.get(log.all.remote()) == [], "the cancelled call ran anyway"


@nbdist.remote
class AsyncLog:
    def __init__(self) -> None:
        self.done: list = []

    async def nap(self, name: str, seconds: float) -> str:
        import asyncio

        await asyncio.sleep(seconds)
        self.done.append(name)
        return name

    async def finished(self) -> list:
        return self.done


def test_async_direct_calls_run_concurrently_and_cancel(tmp_path: Path) -> None:
    actor = AsyncLog.remote()
    nbdist.get(actor.finished.remote())
    sent = direct_sent()
    long = actor.nap.remote("long", 30)
    short = [actor.nap.remote(f"s{i}", 0.1) for i in range(5)]
    assert nbdist.get(short, timeout=20) == [f"s{i}" for i in range(5)]
    nbdist.cancel(long)
    with pytest.raises(exceptions.TaskCancelledError):
        nbdist.get(long, timeout=20)
    assert "long" not in nbdist.get(actor.finished.remote())
    assert direct_sent() - sent >= 7


def test_no_objects_left_at_the_node_after_many_direct_calls(wait_until) -> None:
    log = Log.remote()
    warm(log)
    baseline = node_objects()
    for i in range(500):
        nbdist.get(log.echo.remote(i))
    refs = [log.echo.remote(i) for i in range(500)]
    nbdist.get(refs)
    del refs
    wait_until(lambda: node_objects() <= baseline, timeout=30,
               what="the node to hold no more objects than before")


def test_events_of_direct_calls_match_those_through_the_node(wait_until) -> None:
    from nbdist import events

    seen: list = []
    unsubscribe = events.subscribe(seen.extend)
    try:
        log = Log.remote()
        warm(log)
        sent = direct_sent()
        kept = log.echo.remote("kept")
        assert nbdist.get(kept) == "kept"
        for i in range(20):
            nbdist.get(log.echo.remote(i))  # each result dropped at once
        log.echo.remote("never read")
        assert direct_sent() - sent == 22
        mine = {kept.hex()}

        def settled() -> bool:
            made = {e.object_id for e in seen if e.kind == "object_created"}
            freed = {e.object_id for e in seen if e.kind == "object_freed"}
            done = [e for e in seen if e.kind == "task_finished" and e.name == "Log.echo"]
            return len(done) >= 22 and len(made - freed) == 1 and (made - freed) == mine

        wait_until(settled, timeout=30, what="every direct result created, and freed once "
                                              "dropped (the kept one alive)")
    finally:
        unsubscribe()


def test_driver_without_direct_calls(no_cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NBDIST_DIRECT_ACTOR_CALLS", "0")
    nbdist.init(num_cpus=2)
    log = Log.remote()
    assert nbdist.get([log.add.remote(i) for i in range(20)]) == list(range(1, 21))
    assert runtime.current().direct is None


@nbdist.remote
class Fragile:
    def __init__(self) -> None:
        self.calls = 0

    def work(self) -> int:
        self.calls += 1
        return self.calls

    def pid(self) -> int:
        return os.getpid()

    def die(self) -> None:
        os._exit(1)

    def die_once(self, marker: str) -> str:
        if not os.path.exists(marker):
            Path(marker).touch()
            os._exit(1)
        return "second attempt"

    def sleep(self, seconds: float) -> str:
        time.sleep(seconds)
        return "slept"


def test_a_worker_death_during_a_direct_call(fresh_cluster) -> None:
    actor = Fragile.options(max_restarts=1).remote()
    assert nbdist.get(actor.work.remote()) == 1
    first = nbdist.get(actor.pid.remote())
    sent = direct_sent()
    doomed = actor.die.remote()
    after = actor.work.remote()  # in flight behind it when the process dies
    with pytest.raises(exceptions.ActorDiedError):
        nbdist.get(doomed, timeout=30)
    with pytest.raises(exceptions.ActorDiedError):
        nbdist.get(after, timeout=30)
    assert direct_sent() > sent
    # Restarted with fresh state; once its calls through the node end, over a link again.
    assert retrying(lambda: nbdist.get(actor.work.remote(), timeout=30),
                    on=exceptions.ActorUnavailableError, timeout=30) == 1
    assert nbdist.get(actor.pid.remote()) != first
    sent = direct_sent()
    assert nbdist.get(actor.work.remote()) == 2
    assert direct_sent() == sent + 1


def test_max_task_retries_reruns_a_direct_call_on_the_restarted_actor(
        fresh_cluster, tmp_path: Path) -> None:
    actor = Fragile.options(max_restarts=1, max_task_retries=1).remote()
    assert nbdist.get(actor.work.remote()) == 1
    sent = direct_sent()
    assert nbdist.get(actor.die_once.remote(str(tmp_path / "m")), timeout=60) == \
        "second attempt"
    assert direct_sent() == sent + 1


def test_kill_fails_the_direct_calls_in_flight(fresh_cluster) -> None:
    actor = Fragile.remote()
    assert nbdist.get(actor.work.remote()) == 1
    sleeping = actor.sleep.remote(30)
    queued = actor.work.remote()
    nbdist.kill(actor)
    for ref in (sleeping, queued):
        with pytest.raises(exceptions.ActorDiedError):
            nbdist.get(ref, timeout=30)
    with pytest.raises(exceptions.ActorDiedError):
        nbdist.get(actor.work.remote(), timeout=30)


@nbdist.remote
def same(value):
    return value


def test_a_result_that_escaped_a_call_lost_with_its_link_is_freed_once_dropped(
        fresh_cluster, tmp_path: Path, wait_until) -> None:
    actor = Fragile.options(max_restarts=1, max_task_retries=1).remote()
    assert nbdist.get(actor.work.remote()) == 1
    baseline = node_objects()
    sent = direct_sent()
    ref = actor.die_once.remote(str(tmp_path / "m"))  # its worker dies running it once
    passed = same.remote(ref)  # named to the node while the call is still on the link
    assert direct_sent() == sent + 1
    assert nbdist.get(passed, timeout=60) == "second attempt"
    del ref, passed
    wait_until(lambda: node_objects() <= baseline, timeout=30,
               what="the node to let go of the resubmitted call's result")

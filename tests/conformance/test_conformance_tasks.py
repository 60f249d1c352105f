"""Tasks: arguments, results, options, nesting and cancellation, on both backends."""

from __future__ import annotations

import time

import pytest

import nbdist
from nbdist.exceptions import TaskCancelledError

pytestmark = pytest.mark.timeout(180)


# Decorated at import, before any init: they must run on whichever backend init picks.
@nbdist.remote
def add(a, b):
    return a + b


@nbdist.remote
def identity(x):
    return x


@nbdist.remote(num_returns=2)
def pair(x):
    return x, x * 10


@nbdist.remote
def tree_sum(xs):
    if len(xs) <= 2:
        return sum(xs)
    mid = len(xs) // 2
    return sum(nbdist.get([tree_sum.remote(xs[:mid]), tree_sum.remote(xs[mid:])]))


@nbdist.remote
def sleep_then(seconds, value):
    time.sleep(seconds)
    return value


@nbdist.remote
def runtime_info():
    ctx = nbdist.get_runtime_context()
    return ctx.get_task_id(), ctx.get_node_id(), ctx.get_job_id()


def test_task_result_and_ref_argument_is_resolved(backend) -> None:
    ref = add.remote(1, 2)
    assert isinstance(ref, nbdist.ObjectRef)
    assert nbdist.get(ref) == 3
    assert nbdist.get(add.remote(ref, 10)) == 13
    assert nbdist.get(add.remote(a=ref, b=ref)) == 6


def test_refs_inside_lists_arrive_as_refs(backend) -> None:
    inner = nbdist.put(5)
    [got] = nbdist.get(identity.remote([inner]))
    assert isinstance(got, nbdist.ObjectRef)
    assert nbdist.get(got) == 5


def test_chain_of_dependent_tasks(backend) -> None:
    ref = add.remote(0, 1)
    for _ in range(19):
        ref = add.remote(ref, 1)
    assert nbdist.get(ref) == 20


def test_get_of_a_list_keeps_order(backend) -> None:
    refs = [sleep_then.remote(0.2 * (3 - i), i) for i in range(3)]
    assert nbdist.get(refs) == [0, 1, 2]


def test_num_returns_option(backend) -> None:
    a, b = pair.remote(4)
    assert nbdist.get([a, b]) == [4, 40]
    one = identity.options(num_returns=1).remote(7)
    assert nbdist.get(one) == 7


def test_nested_tasks_fan_out_wider_than_the_cpus(backend) -> None:
    assert nbdist.get(tree_sum.remote(list(range(1, 17)))) == 136


def test_runtime_context_inside_a_task(backend) -> None:
    task_id, node_id, job_id = nbdist.get(runtime_info.remote())
    ctx = nbdist.get_runtime_context()
    assert task_id and node_id
    assert ctx.get_task_id() is None
    assert job_id == ctx.get_job_id()
    assert node_id in {n["NodeID"] for n in nbdist.nodes()}


def test_unknown_option_is_refused_listing_valid_ones(backend) -> None:
    with pytest.raises(ValueError, match="num_cpus"):
        add.options(num_cpu=1)


@nbdist.remote
def span(seconds):
    start = time.time()
    time.sleep(seconds)
    return start, time.time()


def test_custom_resource_limits_concurrency(backend) -> None:
    # One unit of "special" exists: tasks that each need it never run at the same time.
    f = span.options(resources={"special": 1})
    spans = sorted(nbdist.get([f.remote(0.3) for _ in range(3)]))
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert start >= end


def test_cancel_a_running_task(backend) -> None:
    ref = sleep_then.remote(60, "never")
    nbdist.cancel(ref, force=True)
    with pytest.raises(TaskCancelledError):
        nbdist.get(ref, timeout=60)
    assert nbdist.get(add.remote(1, 1)) == 2


def test_cancel_submitted_cancels_what_a_tag_submitted(backend) -> None:
    nbdist.events.set_submitter(lambda: "cell-A")
    try:
        held = [sleep_then.remote(60, i) for i in range(2)]
    finally:
        nbdist.events.set_submitter(None)
    assert nbdist.cancel_submitted("cell-A", force=True) == 2
    for ref in held:
        with pytest.raises(TaskCancelledError):
            nbdist.get(ref, timeout=60)
    assert nbdist.cancel_submitted("cell-A") == 0

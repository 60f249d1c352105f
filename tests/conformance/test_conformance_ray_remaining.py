"""Ray's documented behaviour that its own unit tests check, on both backends: the deprecated
runtime-context id properties warn, the dashboard's address, a task that asks for a resource
no node has, a function too big to ship, and the state a cancelled task is listed in."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

import nbdist

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
    if backend == "nbdist":
        assert url is None  # no dashboard server: nbdist's views are the notebook's panel
    else:
        assert url is None or (isinstance(url, str) and ":" in url)


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

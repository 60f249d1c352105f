"""Concurrency and ref types in a fresh cluster: nbdist's engine, nbdist on Ray, Ray itself.

Parallel work must run in parallel from the first round after ``init``, so these scenarios run
in a new interpreter with a cluster of its own (concurrency_child.py), once per backend, and
Ray's own API runs the same scenarios as the reference. Every check is structural, on the
(start, end) times the tasks recorded themselves, never on a duration:

- as many sleepers as CPUs, submitted right after ``init``: all start before any ends;
- a chain of dependent adds runs one after another, while a tree's first level runs two adds at
  once (2 CPUs) and each level starts after the one it depends on;
- concurrent calls of an async actor (which print) all start before any ends, each having seen
  all the others arrive;
- refs returned inside a list or dict, or received inside one, are ``ObjectRef``s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from polling import assert_ray_session_gone

pytestmark = pytest.mark.timeout(600)

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "concurrency_child.py")
CHILD_TIMEOUT_S = 400.0
LEFTOVER_TIMEOUT_S = 30.0


def _run_child(backend: str) -> dict[str, Any]:
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    proc = subprocess.run([sys.executable, CHILD, backend], capture_output=True, text=True,
                          timeout=CHILD_TIMEOUT_S, env=env, stdin=subprocess.DEVNULL)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("@@result@@ ")]
    assert proc.returncode == 0 and lines, (
        f"the {backend} scenarios failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(lines[-1].split(" ", 1)[1])
    _no_leftovers(result["session_dir"])
    return result


def _no_leftovers(session_dir: str) -> None:
    assert_ray_session_gone(session_dir, "the child", LEFTOVER_TIMEOUT_S)


@pytest.fixture(scope="module", params=["nbdist", "ray", "ray-itself"])
def report(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    yield _run_child(request.param)


def _all_start_before_any_ends(spans: list[list[float]]) -> bool:
    return max(s[0] for s in spans) < min(s[1] for s in spans)


def test_parallel_sleepers_right_after_init_run_together(report) -> None:
    sleepers = [(start, end) for _, start, end in report["sleepers"]]
    assert _all_start_before_any_ends(sleepers), (
        f"the sleepers ran one after another: {report['sleepers']}")
    assert len({pid for pid, _, _ in report["sleepers"]}) == len(sleepers)


def test_chain_is_sequential_and_tree_levels_run_concurrently(report) -> None:
    chain_sum, chain = report["chain"]
    assert chain_sum == 10
    for earlier, later in zip(chain, chain[1:], strict=False):
        assert later[0] >= earlier[1], f"a chain's adds overlapped: {chain}"
    tree_sum, tree = report["tree"]
    assert tree_sum == 28
    # Spans come leaves first: the 4 adds of the first level, then the 2 above, then the root.
    first, second, root = tree[:2] + tree[3:5], [tree[2], tree[5]], tree[6]
    assert any(a is not b and a[0] < b[1] and b[0] < a[1] for a in first for b in first), (
        f"no two adds of the tree's first level ran at the same time: {first}")
    assert all(root[0] >= s[1] for s in second)


def test_async_actor_calls_overlap(report) -> None:
    meet = report["meet"]
    assert all(met for _, _, met in meet), f"calls did not all meet: {meet}"
    assert _all_start_before_any_ends([(s, e) for s, e, _ in meet])


def test_refs_nested_in_lists_and_dicts_are_object_refs(report) -> None:
    assert report["returned_types"] == ["ObjectRef", "ObjectRef"]
    assert report["returned_are_refs"] == [True, True]
    assert report["returned_values"] == [5, 5]
    assert report["argument_types"] == ["ObjectRef", "ObjectRef"]

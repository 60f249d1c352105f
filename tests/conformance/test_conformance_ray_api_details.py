"""Smaller parts of Ray's API that scripts and Ray's own tests use, on both backends: the
lower-level ``_remote(args=..., kwargs=..., **options)`` form of tasks, actors and actor
methods, and the older name ``ObjectID``."""

from __future__ import annotations

import pytest

import nbdist as ray

pytestmark = pytest.mark.timeout(180)


@ray.remote
def add(x, y=0):
    return x + y


@ray.remote
class Box:
    def __init__(self, start, step=1):
        self.value = start
        self.step = step

    def bump(self, times, extra=0):
        self.value += times * self.step + extra
        return self.value

    def pair(self):
        return self.value, self.step


def test_underscore_remote_takes_args_kwargs_and_options(backend: str) -> None:
    assert ray.get(add._remote(args=[1], kwargs={"y": 2})) == 3
    assert ray.get(add._remote(args=(5,))) == 5
    first, second = add._remote(args=[1], num_returns=1, max_retries=0), None
    assert ray.get(first) == 1 and second is None
    box = Box._remote(args=[10], kwargs={"step": 2}, max_concurrency=1)
    assert ray.get(box.bump._remote(args=[3], kwargs={"extra": 1})) == 17
    a, b = box.pair._remote(num_returns=2)
    assert ray.get([a, b]) == [17, 2]


def test_object_id_is_object_ref(backend: str) -> None:
    assert ray.ObjectID is ray.ObjectRef
    assert isinstance(ray.put(1), ray.ObjectID)

"""Option values are checked as Ray checks them, with Ray's error types and words: counts are
ints (or None), -1 meaning "no limit" where Ray allows it; resource amounts are non-negative
numbers no finer than 0.0001; num_returns is an int, 'streaming' or 'dynamic'."""

from __future__ import annotations

import re

import pytest

import nbdist as ray


def f():
    return 1


class A:
    pass


@pytest.mark.parametrize("key,target", [("max_retries", f), ("max_calls", f),
                                        ("max_restarts", A), ("max_task_retries", A),
                                        ("max_concurrency", A)])
def test_a_count_must_be_an_int(key: str, target: object) -> None:
    with pytest.raises(TypeError, match=re.escape(
            f"The type of keyword '{key}' must be {(int, type(None))}, but received type "
            f"{float}")):
        ray.remote(**{key: 0.5})(target)


def test_negative_counts_are_refused_in_rays_words() -> None:
    with pytest.raises(ValueError, match="'max_retries' only accepts None, 0, -1 or a positive"):
        ray.remote(max_retries=-2)(f)
    with pytest.raises(ValueError, match="'max_calls' only accepts None, 0 or a positive"):
        ray.remote(max_calls=-1)(f)
    with pytest.raises(ValueError, match="'max_restarts' only accepts None, 0, -1"):
        ray.remote(max_restarts=-5)(A)
    ray.remote(max_retries=-1)(f)
    ray.remote(max_restarts=-1, max_task_retries=-1)(A)


def test_num_returns_and_resource_amounts() -> None:
    with pytest.raises(TypeError, match="The type of keyword 'num_returns' must be"):
        ray.remote(num_returns=0.5)(f)
    with pytest.raises(ValueError, match="'num_returns' only accepts None, a non-negative"):
        ray.remote(num_returns=-1)(f)
    with pytest.raises(ValueError, match="resource num_cpus cannot be negative"):
        ray.remote(num_cpus=-1)(f)
    with pytest.raises(TypeError, match="The type of keyword 'num_gpus' must be"):
        ray.remote(num_gpus="1")(f)
    with pytest.raises(ValueError, match="resource num_gpus cannot go beyond 0.0001"):
        ray.remote(num_gpus=0.0000001)(f)
    with pytest.raises(ValueError, match="resource custom cannot go beyond 0.0001"):
        ray.remote(resources={"custom": 0.0000001})(f)
    with pytest.raises(TypeError, match="'max_retries'"):
        ray.remote(f).options(max_retries=1.5)
    ray.remote(num_cpus=0.5, num_gpus=0, resources={"custom": 0.25})(f)

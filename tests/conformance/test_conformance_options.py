"""Options Ray accepts, as scripts pass them, on both backends: the ones with a meaning work,
the ones Ray's results do not depend on are accepted quietly, and real mistakes fail where
they are written (a typo names the option meant)."""

from __future__ import annotations

import os

import pytest

import nbdist as ray

pytestmark = pytest.mark.timeout(180)


@ray.remote(enable_task_events=False, _metadata={"app": {"k": 1}}, max_calls=2,
            _labels={"team": "a"})
def plain(x):
    return x + 1


@ray.remote(max_pending_calls=10, allow_out_of_order_execution=False, enable_task_events=True,
            _metadata={"app": {}})
class Counter:
    def __init__(self):
        self.n = 0

    def incr(self):
        self.n += 1
        return self.n


@ray.remote
class Attempts:
    def __init__(self):
        self.n = 0

    def next(self):
        self.n += 1
        return self.n


@ray.remote(max_retries=3, retry_exceptions=[KeyError])
def flaky(attempts):
    n = ray.get(attempts.next.remote())
    if n < 3:
        raise KeyError(f"attempt {n}")
    return n


def test_ray_only_options_are_accepted(backend: str) -> None:
    assert ray.get(plain.remote(1)) == 2
    assert ray.get(plain.options(enable_task_events=True, label_selector={},
                                 name="renamed").remote(2)) == 3
    c = Counter.options(enable_task_events=False).remote()
    assert ray.get([c.incr.remote(), c.incr.options(enable_task_events=False).remote()]) == [1, 2]


def test_retry_exceptions_as_a_list_of_types(backend: str) -> None:
    attempts = Attempts.remote()
    assert ray.get(flaky.remote(attempts)) == 3
    other = Attempts.remote()
    with pytest.raises(ValueError):  # not in the list: no retry
        ray.get(raises_value.remote(other))
    assert ray.get(other.next.remote()) == 2


@ray.remote(max_retries=3, retry_exceptions=[KeyError])
def raises_value(attempts):
    ray.get(attempts.next.remote())
    raise ValueError("not retried")


def test_typos_name_the_option_meant(backend: str) -> None:
    with pytest.raises(ValueError, match="did you mean 'num_cpus'"):
        ray.remote(num_cpu=1)(lambda: 0)
    with pytest.raises(ValueError, match="did you mean 'max_retries'"):
        plain.options(max_retrys=2)
    with pytest.raises(ValueError, match="did you mean 'max_restarts'"):
        Counter.options(max_restart=1)
    with pytest.raises(ValueError, match="Unknown option"):
        plain.options(max_concurrency=2)  # an actor option, not a task one


def test_wrong_types_and_values_fail_early(backend: str) -> None:
    with pytest.raises(TypeError, match="enable_task_events"):
        plain.options(enable_task_events="no")
    with pytest.raises(TypeError, match="_metadata"):
        plain.options(_metadata=[1])
    with pytest.raises(ValueError, match="max_calls"):
        plain.options(max_calls=-1)
    with pytest.raises(ValueError, match="object_store_memory"):
        plain.options(object_store_memory=1 << 20)


def test_object_ref_from_bad_bytes_fails_in_the_task_only(backend: str) -> None:
    @ray.remote(max_retries=0)
    def from_hex(text):
        return ray.ObjectRef(bytes.fromhex(text)).hex()

    with pytest.raises(ValueError):
        ray.get(from_hex.remote("ab" * 40))
    assert ray.get(plain.remote(os.getpid())) == os.getpid() + 1

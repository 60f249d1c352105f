"""Objects and waits: put/get, zero-copy arrays, wait semantics and timeouts, on both
backends."""

from __future__ import annotations

import time

import numpy as np
import pytest

import nbdist
from nbdist.exceptions import GetTimeoutError

pytestmark = pytest.mark.timeout(180)


@nbdist.remote
def total(array):
    return float(array.sum())


@nbdist.remote
def make(n):
    return np.arange(n, dtype=np.float64)


@nbdist.remote
def sleep_then(seconds, value):
    time.sleep(seconds)
    return value


@pytest.mark.parametrize("value", [0, "text", b"\x00bytes", [1, {"a": (2, 3)}], None])
def test_small_values_round_trip(backend, value) -> None:
    assert nbdist.get(nbdist.put(value)) == value


def test_put_of_a_large_array_comes_back_read_only_without_a_copy(backend) -> None:
    array = np.arange(2_000_000, dtype=np.float64)
    ref = nbdist.put(array)
    first, second = nbdist.get(ref), nbdist.get(ref)
    assert np.array_equal(first, array)
    assert not first.flags.writeable
    assert np.shares_memory(first, second)
    assert nbdist.get(total.remote(ref)) == float(array.sum())


def test_large_array_returned_by_a_task(backend) -> None:
    out = nbdist.get(make.remote(1_000_000))
    assert out.shape == (1_000_000,) and out[-1] == 999_999.0
    assert not out.flags.writeable


def test_put_of_a_ref_is_refused(backend) -> None:
    with pytest.raises(TypeError):
        nbdist.put(nbdist.put(1))


def test_wait_splits_ready_and_pending_in_input_order(backend) -> None:
    slow = sleep_then.remote(30, "slow")
    fast = [sleep_then.remote(0, i) for i in range(3)]
    ready, pending = nbdist.wait([slow, *fast], num_returns=3, timeout=60)
    assert ready == fast
    assert pending == [slow]
    nbdist.cancel(slow, force=True)


def test_wait_with_timeout_returns_what_is_ready(backend) -> None:
    slow = sleep_then.remote(30, "slow")
    done = nbdist.put(1)
    ready, pending = nbdist.wait([slow, done], num_returns=2, timeout=0.5)
    assert ready == [done] and pending == [slow]
    with pytest.raises(ValueError):  # as Ray 2.60: at least one ref must be asked for
        nbdist.wait([slow], num_returns=0)
    nbdist.cancel(slow, force=True)


def test_wait_argument_errors(backend) -> None:
    ref = nbdist.put(1)
    with pytest.raises(TypeError):
        nbdist.wait(ref)
    with pytest.raises(ValueError):
        nbdist.wait([ref], num_returns=2)
    with pytest.raises(ValueError):
        nbdist.wait([ref, ref])


def test_get_timeout(backend) -> None:
    slow = sleep_then.remote(30, "slow")
    with pytest.raises(GetTimeoutError) as info:
        nbdist.get(slow, timeout=0.3)
    assert isinstance(info.value, TimeoutError)
    nbdist.cancel(slow, force=True)


def test_future_and_await(backend) -> None:
    import asyncio

    ref = sleep_then.remote(0, 42)
    assert ref.future().result(timeout=60) == 42

    async def main():
        return await sleep_then.remote(0, 7)

    assert asyncio.run(main()) == 7

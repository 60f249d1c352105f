"""Errors: remote exceptions keep their type and traceback, and bad input is refused early
with a message that says what was wrong."""

from __future__ import annotations

import re
import threading
import time

import pytest

import nbdist
from nbdist import exceptions

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("cluster")]


class BoomError(Exception):
    pass


class CodedError(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(f"failed with code {code}")
        self.code = code


@nbdist.remote
def explode(x: int) -> int:
    raise BoomError(f"boom {x}")


@nbdist.remote
def explode_with_code(code: int) -> None:
    raise CodedError(code)


@nbdist.remote
def divide(a: float, b: float) -> float:
    return a / b


@nbdist.remote
def plus_one(x: int) -> int:
    return x + 1


def test_task_exception_is_user_type_and_task_error() -> None:
    with pytest.raises(BoomError) as info:
        nbdist.get(explode.remote(7))
    err = info.value
    assert isinstance(err, exceptions.TaskError)
    assert isinstance(err, exceptions.RayTaskError)
    assert isinstance(err, exceptions.NbdistError)
    text = str(err)
    assert "boom 7" in text
    # The remote traceback, down to the frame that raised.
    assert re.search(r'File ".*test_errors\.py", line \d+, in explode', text), text


def test_builtin_exception_type_is_kept() -> None:
    with pytest.raises(ZeroDivisionError) as info:
        nbdist.get(divide.remote(1, 0))
    assert isinstance(info.value, exceptions.TaskError)
    assert "division by zero" in str(info.value)


def test_exception_attributes_survive() -> None:
    with pytest.raises(CodedError) as info:
        nbdist.get(explode_with_code.remote(42))
    assert info.value.code == 42
    assert "failed with code 42" in str(info.value)


def test_exception_propagates_through_dependent_tasks() -> None:
    failed = explode.remote(3)
    downstream = plus_one.remote(plus_one.remote(failed))
    with pytest.raises(BoomError) as info:
        nbdist.get(downstream)
    assert isinstance(info.value, exceptions.TaskError)
    assert "boom 3" in str(info.value)


def test_failure_inside_a_list_fails_the_whole_get() -> None:
    refs = [plus_one.remote(1), explode.remote(1), plus_one.remote(2)]
    with pytest.raises(BoomError):
        nbdist.get(refs)
    assert nbdist.get(refs[2]) == 3


@nbdist.remote
class Fragile:
    def __init__(self) -> None:
        self.calls = 0

    def fail(self) -> None:
        self.calls += 1
        raise BoomError("method failed")

    def count(self) -> int:
        self.calls += 1
        return self.calls

    def take(self, item) -> None:
        self.item = item


def test_actor_method_exception_keeps_type_and_actor_survives() -> None:
    actor = Fragile.remote()
    with pytest.raises(BoomError) as info:
        nbdist.get(actor.fail.remote())
    assert isinstance(info.value, exceptions.TaskError)
    assert "method failed" in str(info.value)
    assert nbdist.get(actor.count.remote()) == 2


@nbdist.remote
class BrokenInit:
    def __init__(self) -> None:
        raise BoomError("constructor failed")

    def ping(self) -> str:
        return "pong"


def test_exception_in_actor_init_surfaces_on_method_calls() -> None:
    actor = BrokenInit.remote()
    for _ in range(2):
        with pytest.raises(exceptions.ActorDiedError) as info:
            nbdist.get(actor.ping.remote(), timeout=30)
        assert "constructor failed" in str(info.value)


@nbdist.remote
def takes_two(first, guarded):
    return first


@pytest.mark.nbdist_only
def test_unpicklable_positional_argument_is_refused_at_submit() -> None:
    with pytest.raises(TypeError) as info:
        takes_two.remote(1, threading.Lock())
    text = str(info.value)
    assert re.search(r"lock", text, re.IGNORECASE), text
    position = r"guarded|(?:argument|arg|position)\s*#?\s*[12]\b|args\[1\]|second"
    assert re.search(position, text, re.IGNORECASE), text


@pytest.mark.nbdist_only
def test_unpicklable_keyword_argument_is_refused_at_submit() -> None:
    with pytest.raises(TypeError) as info:
        takes_two.remote(1, guarded=threading.Lock())
    text = str(info.value)
    assert "guarded" in text and re.search(r"lock", text, re.IGNORECASE), text


def test_unpicklable_argument_to_actor_method_is_refused() -> None:
    actor = Fragile.remote()
    with pytest.raises(TypeError) as info:
        actor.take.remote(threading.Lock())
    assert re.search(r"lock", str(info.value), re.IGNORECASE), str(info.value)


@nbdist.remote
def returns_lock() -> threading.Lock:
    return threading.Lock()


def test_unpicklable_return_value_fails_the_task_and_worker_survives() -> None:
    with pytest.raises(exceptions.NbdistError) as info:
        nbdist.get(returns_lock.remote())
    assert re.search(r"pickl|serializ", str(info.value), re.IGNORECASE), str(info.value)
    assert re.search(r"lock", str(info.value), re.IGNORECASE), str(info.value)
    assert nbdist.get(plus_one.remote(1)) == 2


@nbdist.remote
class LockKeeper:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls = 0

    def give_lock(self) -> threading.Lock:
        self.calls += 1
        return self.lock

    def count(self) -> int:
        self.calls += 1
        return self.calls


def test_unpicklable_method_result_fails_the_call_and_actor_keeps_state() -> None:
    keeper = LockKeeper.remote()
    with pytest.raises(exceptions.NbdistError) as info:
        nbdist.get(keeper.give_lock.remote())
    assert re.search(r"pickl|serializ", str(info.value), re.IGNORECASE), str(info.value)
    assert nbdist.get(keeper.count.remote()) == 2


def test_calling_a_remote_function_directly_raises() -> None:
    with pytest.raises(TypeError, match=r"\.remote\("):
        plus_one(1)


def test_instantiating_an_actor_class_directly_raises() -> None:
    with pytest.raises(TypeError, match=r"\.remote\("):
        Fragile()


def test_calling_an_actor_method_directly_raises() -> None:
    actor = Fragile.remote()
    with pytest.raises(TypeError, match=r"\.remote\("):
        actor.count()


def _assert_lists_valid_options(err: BaseException, bad: str, valid: list[str]) -> None:
    text = str(err)
    assert bad in text, text
    for name in valid:
        assert name in text, f"{name!r} missing from: {text}"


def test_unknown_task_option_raises_listing_valid_ones() -> None:
    with pytest.raises((ValueError, TypeError)) as info:
        plus_one.options(num_cpu=1)
    _assert_lists_valid_options(info.value, "num_cpu", ["num_cpus", "max_retries"])


def test_unknown_actor_option_raises_listing_valid_ones() -> None:
    with pytest.raises((ValueError, TypeError)) as info:
        Fragile.options(max_restart=1)
    _assert_lists_valid_options(info.value, "max_restart", ["max_restarts", "max_concurrency"])


def test_unknown_decorator_option_raises() -> None:
    with pytest.raises((ValueError, TypeError)) as info:

        @nbdist.remote(num_cpu=1)
        def f() -> None:
            pass

    _assert_lists_valid_options(info.value, "num_cpu", ["num_cpus"])


def test_get_of_a_non_ref_raises_type_error() -> None:
    with pytest.raises(TypeError):
        nbdist.get(42)


def test_wait_for_more_than_given_raises_value_error() -> None:
    ref = plus_one.remote(1)
    with pytest.raises(ValueError):
        nbdist.wait([ref], num_returns=2)


def test_wait_on_a_single_ref_instead_of_a_list_raises_type_error() -> None:
    ref = plus_one.remote(1)
    with pytest.raises(TypeError):
        nbdist.wait(ref)


def test_put_of_a_ref_raises_type_error() -> None:
    with pytest.raises(TypeError):
        nbdist.put(plus_one.remote(1))


@nbdist.remote
def nap(seconds: float) -> str:
    time.sleep(seconds)
    return "rested"


def test_an_impossible_memory_request_shows_sizes_in_binary_units() -> None:
    with pytest.raises(ValueError) as info:
        nbdist.get(divide.options(memory=3 * 2**40 + 2**39).remote(1, 2))
    message = str(info.value)
    assert "'divide' needs {CPU: 1, memory: 3584.0 GiB} but the cluster has only" in message
    assert re.search(r"memory: \d+\.\d [KMG]iB, object_store_memory: \d+\.\d [KMG]iB",
                     message), message
    assert not re.search(r"\de[+-]\d", message), message


def test_get_timeout_on_a_long_task() -> None:
    slow = nap.remote(60)
    try:
        with pytest.raises(exceptions.GetTimeoutError) as info:
            nbdist.get(slow, timeout=0.5)
        assert isinstance(info.value, TimeoutError)
    finally:
        nbdist.cancel(slow, force=True)

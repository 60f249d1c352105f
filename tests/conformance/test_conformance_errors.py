"""Errors: a task's exception is nbdist's TaskError and the user's own type, with the remote
traceback; actor and serialization failures are nbdist's types, on both backends."""

from __future__ import annotations

import threading

import pytest

import nbdist
from nbdist.exceptions import ActorDiedError, SerializationError, TaskError


class Overdrawn(ValueError):
    def __init__(self, amount):
        super().__init__(f"overdrawn by {amount}")
        self.amount = amount


pytestmark = pytest.mark.timeout(180)


@nbdist.remote
def withdraw(amount):
    raise Overdrawn(amount)


@nbdist.remote
def divide(a, b):
    return a / b


@nbdist.remote
def add(a, b):
    return a + b


@nbdist.remote
def lock_maker():
    return threading.Lock()


@nbdist.remote
class Broken:
    def __init__(self):
        raise RuntimeError("constructor failed on purpose")

    def ping(self):
        return "pong"


@nbdist.remote
class Account:
    def __init__(self):
        self.balance = 10

    def take(self, amount):
        if amount > self.balance:
            raise Overdrawn(amount - self.balance)
        self.balance -= amount
        return self.balance


def test_user_exception_type_is_kept_with_the_remote_traceback(backend) -> None:
    with pytest.raises(Overdrawn) as info:
        nbdist.get(withdraw.remote(5))
    err = info.value
    assert isinstance(err, TaskError)
    assert err.amount == 5
    assert isinstance(err.cause, Overdrawn)
    assert "in withdraw" in err.remote_traceback
    assert "raise Overdrawn(amount)" in err.remote_traceback
    assert "nbdist" not in err.remote_traceback.replace("nbdist.get", "")


def test_builtin_exception_type_is_kept(backend) -> None:
    with pytest.raises(ZeroDivisionError):
        nbdist.get(divide.remote(1, 0))


def test_exception_propagates_through_dependent_tasks(backend) -> None:
    failed = divide.remote(1, 0)
    with pytest.raises(ZeroDivisionError):
        nbdist.get(add.remote(failed, 1))


def test_actor_method_exception_keeps_type_and_actor_survives(backend) -> None:
    a = Account.remote()
    with pytest.raises(Overdrawn) as info:
        nbdist.get(a.take.remote(15))
    assert info.value.amount == 5
    assert nbdist.get(a.take.remote(4)) == 6


def test_exception_in_actor_constructor_surfaces_on_calls(backend) -> None:
    b = Broken.remote()
    with pytest.raises(ActorDiedError, match="constructor failed on purpose"):
        nbdist.get(b.ping.remote(), timeout=60)


def test_unpicklable_argument_is_refused_at_submit(backend) -> None:
    with pytest.raises(SerializationError):
        add.remote(threading.Lock(), 1)
    with pytest.raises(TypeError):  # SerializationError is also a TypeError
        nbdist.put(threading.Lock())


def test_unpicklable_return_value_fails_the_task(backend) -> None:
    with pytest.raises(TaskError):
        nbdist.get(lock_maker.remote())
    assert nbdist.get(add.remote(1, 2)) == 3

"""A ref pickled outside nbdist's serializer (``pickle.dumps``, ``cloudpickle.dump`` to a file)
keeps its object for the life of the process that pickled it: nothing tells when such bytes are
read back, so dropping the last live ref must not free the object under them. Ray pins the same
way when its own ``ray.cloudpickle`` pickles a ref; nbdist pins whichever pickler is used."""

from __future__ import annotations

import gc
import pickle

import cloudpickle
import pytest

import nbdist

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("cluster")]

# Bounds a get that would otherwise wait for ever on a freed object.
GET_TIMEOUT_S = 30.0


@nbdist.remote
def pickled_put(value):
    return pickle.dumps(nbdist.put(value))


@nbdist.remote
def identity(x):
    return x


def test_a_ref_pickled_by_the_driver_outlives_its_last_live_ref() -> None:
    ref = nbdist.put({"hello": "world"})
    data = cloudpickle.dumps(ref)
    del ref
    gc.collect()
    nbdist.get(identity.remote(0))  # the release has reached the node
    assert nbdist.get(cloudpickle.loads(data), timeout=GET_TIMEOUT_S) == {"hello": "world"}


def test_a_ref_pickled_in_a_task_outlives_the_task() -> None:
    data = nbdist.get(pickled_put.remote([1, 2, 3]))
    assert nbdist.get(pickle.loads(data), timeout=GET_TIMEOUT_S) == [1, 2, 3]

"""Refs handed to user code are ``ObjectRef``s, as on Ray, wherever they turn up."""

from __future__ import annotations

import pytest

import nbdist

pytestmark = pytest.mark.timeout(180)


@nbdist.remote
def identity(x):
    return x


@nbdist.remote
def make_refs():
    return [nbdist.put(1)], {"k": nbdist.put(2)}


@nbdist.remote
def type_names(items):
    values = items.values() if isinstance(items, dict) else items
    return [(type(v).__name__, isinstance(v, nbdist.ObjectRef)) for v in values]


def test_refs_have_the_type_name_object_ref(backend) -> None:
    ref = identity.remote(1)
    assert type(ref).__name__ == "ObjectRef"
    assert type(nbdist.put(1)).__name__ == "ObjectRef"


def test_refs_nested_in_returned_lists_and_dicts(backend) -> None:
    inner = nbdist.put(5)
    [in_list] = nbdist.get(identity.remote([inner]))
    in_dict = nbdist.get(identity.remote({"k": inner}))["k"]
    made_list, made_dict = nbdist.get(make_refs.remote())
    for ref in (in_list, in_dict, made_list[0], made_dict["k"]):
        assert type(ref).__name__ == "ObjectRef"
        assert isinstance(ref, nbdist.ObjectRef)
    assert nbdist.get([in_list, in_dict, made_list[0], made_dict["k"]]) == [5, 5, 1, 2]


def test_refs_nested_in_arguments(backend) -> None:
    inner = nbdist.put(5)
    assert nbdist.get(type_names.remote([inner])) == [("ObjectRef", True)]
    assert nbdist.get(type_names.remote({"k": inner})) == [("ObjectRef", True)]


def test_get_of_a_list_naming_one_ref_twice(backend) -> None:
    ref = identity.remote(3)
    assert nbdist.get([ref, ref, identity.remote(4)]) == [3, 3, 4]

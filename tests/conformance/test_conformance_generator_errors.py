"""A generator that raises part-way, with a fixed ``num_returns=N`` or ``"dynamic"``, on both
backends: the values it yielded stay readable and its error is where the missing ones would
be (Ray's ``generator.py`` documentation example)."""

from __future__ import annotations

import pytest

import nbdist

pytestmark = pytest.mark.timeout(120)


@nbdist.remote
def two_then_fail():
    yield 0
    yield 1
    raise KeyError("no third value")


def test_fixed_returns_keep_the_yielded_values_and_the_rest_hold_the_error(backend) -> None:
    first, second, third, fourth = two_then_fail.options(num_returns=4).remote()
    assert nbdist.get([first, second]) == [0, 1]
    for ref in (third, fourth):
        with pytest.raises(KeyError, match="no third value"):
            nbdist.get(ref)


def test_an_error_after_every_fixed_return_was_yielded_leaves_them_readable(backend) -> None:
    first, second = two_then_fail.options(num_returns=2).remote()
    assert nbdist.get([first, second]) == [0, 1]


def test_a_dynamic_generator_keeps_its_values_and_ends_with_its_error(backend) -> None:
    refs = list(nbdist.get(two_then_fail.options(num_returns="dynamic").remote()))
    assert len(refs) == 3
    assert nbdist.get(refs[:2]) == [0, 1]
    with pytest.raises(KeyError, match="no third value"):
        nbdist.get(refs[2])

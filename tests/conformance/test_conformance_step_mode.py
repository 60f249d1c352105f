"""Step-through mode is nbdist's own engine's: there it holds tasks until a step; on Ray the
calls raise an error that says so (rather than silently running everything)."""

from __future__ import annotations

import pytest

import nbdist
from nbdist.exceptions import NbdistError


@nbdist.remote
def _double(x: int) -> int:
    return 2 * x


def test_step_mode_holds_on_nbdist_and_is_refused_on_ray(backend: str) -> None:
    if backend == "ray":
        with pytest.raises(NbdistError, match="backend='ray'"):
            nbdist.step_mode(True)
        with pytest.raises(NbdistError, match="backend='ray'"):
            nbdist.step()
        assert nbdist.get(_double.remote(4)) == 8  # and nothing is held
        return
    with nbdist.step_mode(True) as status:
        assert status.on and status.held == 0
        ref = _double.remote(21)
        stepped = nbdist.step()
        assert [name for _, name in stepped.released] == ["_double"]
        assert nbdist.get(ref) == 42
    assert not nbdist.step_mode(False).on
